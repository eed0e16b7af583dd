// The CUDA backend's linear() of packed weights (see packed_linear.h).
#include "backend/cuda/packed_linear.h"

#include "backend/cuda/fp8_gemm.h"
#include "backend/cuda/host_check.h"
#include "core/packed_layout.h"
#include "ops/linear/linear_cuda.h"
#include "ops/moe/moe_cuda.h"

namespace dg {

using cuda_host::check;

void packed_linear_cuda(const CublasCtx& c, const Tensor& x, int64_t rows, int64_t K, const Tensor& w, Tensor& out,
                        WeightLayout q4) {
  if (c.act8 && w.dtype == DType::kFp8) {
    const Tensor* ws[1] = {&w};
    Tensor* outs[1] = {&out};
    fp8_linears_cuda(c, x, rows, K, ws, outs);
    return;
  }
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

void dense_linear_cuda(const CublasCtx& c, const void* x, int64_t rows, int64_t K, const void* W, int64_t N, void* y) {
  if (c.dense_stream && rows > 64 && K % 8 == 0 && N % 8 == 0) {
    check(stream_linear_cuda(x, rows, K, W, DType::kBF16, N, y, c.stream, WeightLayout::kDisk, nullptr, true));
    return;
  }
  gemm_xwt_cublas(c.blas, x, rows, K, W, N, y, CUDA_R_16BF);
}

void fp8_linears_cuda(const CublasCtx& c, const Tensor& x, int64_t rows, int64_t K, std::span<const Tensor* const> w,
                      std::span<Tensor* const> out) {
  DG_CHECK(c.fp8 != nullptr, "fp8 linears: the backend has no W8A8 product");
  Tensor xq = c.alloc(DType::kU8, Shape{rows, K}), xs = c.alloc(DType::kF32, Shape{rows});
  check(moe_act_quant_fp8_cuda(x.data, rows, K, xq.data, xs.f32(), c.stream));
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] == nullptr) continue;
    const Tensor& t = *w[i];
    DG_CHECK(t.dtype == DType::kFp8 && t.shape.rank == 2 && t.shape[1] == K,
             "fp8 linears: weight {} ({}) does not take fp8 inputs of width {}", i, t.shape.str(), K);
    const int64_t N = t.shape[0];
    if (c.a8_stream) {  // A/B: the scales in the kernel's epilogue; passes of 128 rows past 64
      check(stream_linear_cuda(xq.data, rows, K, t.data, DType::kFp8, N, out[i]->data, c.stream, WeightLayout::kDisk,
                               xs.f32(), rows > 64));
      continue;
    }
    Tensor acc = c.alloc(DType::kF32, Shape{rows, N});
    c.fp8->run(xq.data, rows, K, t.data, N, acc.f32(), c.stream);
    check(rowscaled_epilogue_cuda(acc.f32(), t.data, DType::kFp8, rows, N, K, out[i]->data, c.stream, xs.f32()));
  }
}

}  // namespace dg
