// linear() of a packed weight on the CUDA backend: the weight-streaming kernel's dense form (src/ops/moe/
// moe_stream.cu), or for the per-row-scaled formats (q8, fp8) at kRowscaledCublasRows rows and more a cuBLAS
// product over the codes as bf16 with the scales applied to its f32 sums (src/ops/linear/linear_cuda.h): the
// streaming kernel takes its rows in passes of 64, re-reading the weights per pass. fp8 weights with fp8
// activations (`--linear-act`) take the W8A8 product instead: the input quantised per row, cuBLASLt's e4m3 product,
// the two scales on its f32 sums.
#pragma once

#include <span>

#include "backend/cuda/cublas_paths.h"
#include "core/tensor.h"
#include "ops/moe/moe_cuda.h"

namespace dg {

inline constexpr int64_t kRowscaledCublasRows = 128;

// out [rows, N] bf16 = x [rows, K] bf16 times the packed weight w [N, K]^T; with c.act8 fp8 weights take the W8A8
// product.
void packed_linear_cuda(const CublasCtx& c, const Tensor& x, int64_t rows, int64_t K, const Tensor& w, Tensor& out,
                        WeightLayout q4);

// y [rows, N] bf16 = x [rows, K] W [N, K]^T for bf16 W: cuBLAS, or the streaming kernel where c.dense_stream asks
// and the shape suits it (65 rows and more, K and N multiples of 8).
void dense_linear_cuda(const CublasCtx& c, const void* x, int64_t rows, int64_t K, const void* W, int64_t N, void* y);

// The W8A8 products of fp8 weights that share the input x [rows, K] (quantised once, per row, as the experts'
// activations are: moe_act_quant_fp8_cuda): out[i] [rows, N_i] bf16. Null weights are skipped.
void fp8_linears_cuda(const CublasCtx& c, const Tensor& x, int64_t rows, int64_t K, std::span<const Tensor* const> w,
                      std::span<Tensor* const> out);

}  // namespace dg
