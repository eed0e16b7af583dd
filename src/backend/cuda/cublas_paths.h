// The cuBLAS-driven paths of the CUDA backend: attention as gathered-key batched GEMMs around a masked softmax
// (selectable for comparison; docs/NEGATIVE.md), top-k attention's scores, and the MoE expert products through
// cuBLAS's grouped GEMM.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"
#include "ops/attention/attention_cuda.h"
#include "ops/attention/attention_topk_cuda.h"

namespace dg {

class Fp8Gemm;

struct CublasCtx {
  cublasHandle_t blas = nullptr;
  cudaStream_t stream = nullptr;
  std::function<Tensor(DType, Shape)> alloc;  // stream-ordered device buffers of the backend
  Fp8Gemm* fp8 = nullptr;                     // the W8A8 products through cuBLASLt (fp8_gemm.h)
  bool a8_stream = false;     // W8A8 linears through the streaming kernel (CudaKernels::a8_linears_stream)
  bool dense_stream = false;  // CudaKernels::dense_stream
  bool act8 = false;          // fp8 linears take fp8 activations: W8A8 products (BackendOptions::linear_act8)
  bool a8_on_load = false;    // CudaKernels::a8_scales_on_load
  int soft_loads = 1;         // CudaKernels::soft_probs_loads
};

// q: bf16 [rows, n_heads, D]; keys: `cached` then the fresh bf16 rows; out: bf16 [rows, n_heads * D].
void attention_gemm_cublas(const CublasCtx& c, const Tensor& q, int64_t q_pos0, const CachedKv& cached,
                           const Tensor& k_fresh, const Tensor& v_fresh, int64_t fresh_pos0, bool causal,
                           int64_t window, Tensor& out);
// Top-k attention (src/ops/attention/attention_topk.h; topk on): the same gathered keys and cuBLAS scores, query rows
// in chunks whose f32 scores stay under kTopkScoreBytes, then attention_topk_select_cuda per chunk.
inline constexpr int64_t kTopkScoreBytes = int64_t{1} << 30;
void attention_topk_cublas(const CublasCtx& c, const Tensor& q, int64_t q_pos0, const CachedKv& cached,
                           const Tensor& k_fresh, const Tensor& v_fresh, int64_t fresh_pos0, bool causal,
                           int64_t window, const AttnTopk& topk, Tensor& out);
// y[M, N] = x[M, K] W[N, K]^T, bf16 inputs, f32 accumulation, y in `ytype` (bf16 or f32): the dense products.
void gemm_xwt_cublas(cublasHandle_t blas, const void* x, int64_t M, int64_t K, const void* W, int64_t N, void* y,
                     cudaDataType ytype);
// y[i] = x[i] W_e^T for each expert e's rows [off[e], off[e+1]) (host offsets); synchronises the stream.
void grouped_gemm_cublas(const CublasCtx& c, const void* x, int64_t K, const void* W, int64_t N,
                         const std::vector<int32_t>& off, void* y);

}  // namespace dg
