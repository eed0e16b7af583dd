#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "ops/rmsnorm/rmsnorm.h"

namespace dg {
namespace {

using cuda::from_f32;
using cuda::to_f32;

constexpr int kThreads = 256;

template <typename TX, typename TW, typename TY>
__global__ void rmsnorm_kernel(const TX* __restrict__ x, const TW* __restrict__ w, TY* __restrict__ y, int64_t dim,
                               float eps) {
  const int64_t row = blockIdx.x;
  const TX* xr = x + row * dim;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
    const float v = to_f32(xr[i]);
    ss += v * v;
  }
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  __shared__ float warp_sums[kThreads / 32];
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = ss;
  __syncthreads();
  if (threadIdx.x < 32) {
    float t = threadIdx.x < kThreads / 32 ? warp_sums[threadIdx.x] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) t += __shfl_xor_sync(0xffffffffu, t, off);
    if (threadIdx.x == 0) warp_sums[0] = t;
  }
  __syncthreads();
  const float inv = rsqrtf(warp_sums[0] / static_cast<float>(dim) + eps);
  TY* yr = y + row * dim;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
    float v = to_f32(xr[i]) * inv;
    if (w != nullptr) v *= to_f32(w[i]);
    yr[i] = from_f32<TY>(v);
  }
}

template <typename TX, typename TW, typename TY>
Status launch(const void* x, const void* w, void* y, int64_t rows, int64_t dim, float eps, cudaStream_t s) {
  rmsnorm_kernel<TX, TW, TY><<<static_cast<unsigned>(rows), kThreads, 0, s>>>(
      static_cast<const TX*>(x), static_cast<const TW*>(w), static_cast<TY*>(y), dim, eps);
  return cuda_status(cudaGetLastError(), "rmsnorm_cuda launch");
}

template <typename TX, typename TY>
Status dispatch_w(const void* x, const void* w, DType wt, void* y, int64_t rows, int64_t dim, float eps,
                  cudaStream_t s) {
  switch (wt) {
    case DType::kBF16: return launch<TX, __nv_bfloat16, TY>(x, w, y, rows, dim, eps, s);
    case DType::kF16: return launch<TX, __half, TY>(x, w, y, rows, dim, eps, s);
    case DType::kF32: return launch<TX, float, TY>(x, w, y, rows, dim, eps, s);
    default: return Status::error("rmsnorm_cuda: weight dtype must be bf16, f16 or f32");
  }
}

template <typename TX>
Status dispatch_y(const void* x, const void* w, DType wt, void* y, DType yt, int64_t rows, int64_t dim, float eps,
                  cudaStream_t s) {
  switch (yt) {
    case DType::kBF16: return dispatch_w<TX, __nv_bfloat16>(x, w, wt, y, rows, dim, eps, s);
    case DType::kF16: return dispatch_w<TX, __half>(x, w, wt, y, rows, dim, eps, s);
    case DType::kF32: return dispatch_w<TX, float>(x, w, wt, y, rows, dim, eps, s);
    default: return Status::error("rmsnorm_cuda: output dtype must be bf16, f16 or f32");
  }
}

}  // namespace

Status rmsnorm_cuda(const void* x, DType xt, const void* w, DType wt, void* y, DType yt, int64_t rows, int64_t dim,
                    float eps, cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return Status::error("rmsnorm_cuda: empty shape");
  if (rows > 0x7fffffff) return Status::error("rmsnorm_cuda: too many rows for one grid");
  if (x == nullptr || y == nullptr) return Status::error("rmsnorm_cuda: null input or output");
  if (w == nullptr) wt = DType::kF32;
  switch (xt) {
    case DType::kBF16: return dispatch_y<__nv_bfloat16>(x, w, wt, y, yt, rows, dim, eps, stream);
    case DType::kF16: return dispatch_y<__half>(x, w, wt, y, yt, rows, dim, eps, stream);
    case DType::kF32: return dispatch_y<float>(x, w, wt, y, yt, rows, dim, eps, stream);
    default: return Status::error("rmsnorm_cuda: input dtype must be bf16, f16 or f32");
  }
}

}  // namespace dg
