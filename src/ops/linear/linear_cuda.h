// CUDA pieces of linear() for the per-row-scaled packed formats (q8, fp8: w = scale[row] · code) at many rows,
// where a cuBLAS product over the codes beats the weight-streaming kernel (src/backend/cuda/packed_linear.cpp): the
// codes as bf16 (exact: |q8| <= 127, and every E4M3 value is a bf16), the product's f32 sums, then each output
// column times its weight row's scale, rounded to bf16 once (the streaming kernel's epilogue: the same arithmetic,
// summation order aside). Only the .cu file, the CUDA backend and the CUDA tests include this header.
#pragma once

#include "ops/linear/linear.h"

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include "core/dtype.h"
#include "core/status.h"

namespace dg {

// codes_bf16 [n, k] = the code plane of the packed q8 or fp8 weight w [n, k] (device), as bf16.
Status rowscaled_codes_bf16_cuda(const void* w, DType fmt, int64_t n, int64_t k, void* codes_bf16, cudaStream_t s);
// y [rows, n] bf16 = acc [rows, n] f32 times the scale plane of w [n, k] per column, and with x_scale (device,
// [rows]) also times x_scale[row] first: (acc · x_scale[r]) · w_scale[c], rounded once.
Status rowscaled_epilogue_cuda(const float* acc, const void* w, DType fmt, int64_t rows, int64_t n, int64_t k,
                               void* y, cudaStream_t s, const float* x_scale = nullptr);

}  // namespace dg
#endif
