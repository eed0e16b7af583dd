// The CUDA backend's linear() of packed weights (see packed_linear.h).
#include "backend/cuda/packed_linear.h"

#include "backend/cuda/host_check.h"
#include "ops/linear/linear_cuda.h"
#include "ops/moe/moe_cuda.h"

namespace dg {

using cuda_host::check;

void packed_linear_cuda(const CublasCtx& c, const Tensor& x, int64_t rows, int64_t K, const Tensor& w, Tensor& out,
                        Q4Layout q4) {
  const int64_t N = w.shape[0];
  const bool rowscaled = (w.dtype == DType::kQ8 || w.dtype == DType::kFp8) && w.shape.rank == 2;
  if (!rowscaled || rows < kRowscaledCublasRows) {
    check(stream_linear_cuda(x.data, rows, K, w.data, w.dtype, N, out.data, c.stream, q4));
    return;
  }
  Tensor codes = c.alloc(DType::kBF16, Shape{N, K});
  check(rowscaled_codes_bf16_cuda(w.data, w.dtype, N, K, codes.data, c.stream));
  Tensor acc = c.alloc(DType::kF32, Shape{rows, N});
  gemm_xwt_cublas(c.blas, x.data, rows, K, codes.data, N, acc.data, CUDA_R_32F);
  check(rowscaled_epilogue_cuda(acc.f32(), w.data, w.dtype, rows, N, K, out.data, c.stream));
}

}  // namespace dg
