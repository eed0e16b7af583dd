#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/elementwise/elementwise.h"
#include "ops/elementwise/synthetic_uniform.h"

namespace dg {
namespace {

using cuda::bf16;
using cuda::f16;

__global__ void add_kernel(const bf16* a, const bf16* b, bf16* out, int64_t n) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16_rn(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}

__global__ void scale_kernel(bf16* x, float s, int64_t n) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = __float2bfloat16_rn(__bfloat162float(x[i]) * s);
}

__global__ void fill_uniform_kernel(bf16* x, int64_t n, uint64_t seed, float scale, float offset) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = __float2bfloat16_rn(synthetic_uniform(seed, static_cast<uint64_t>(i), scale, offset));
}

template <typename S, typename D>
__global__ void convert_kernel(const S* src, D* dst, int64_t n) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) dst[i] = cuda::from_f32<D>(cuda::to_f32(src[i]));
}

template <typename S>
Status convert_to(const void* src, void* dst, DType dt, int64_t n, cudaStream_t s) {
  const unsigned g = cuda::blocks_for(n, 256);
  switch (dt) {
    case DType::kBF16: cuda::launch(convert_kernel<S, bf16>, g, 256, 0, s, static_cast<const S*>(src), static_cast<bf16*>(dst), n); break;
    case DType::kF16: cuda::launch(convert_kernel<S, f16>, g, 256, 0, s, static_cast<const S*>(src), static_cast<f16*>(dst), n); break;
    case DType::kF32: cuda::launch(convert_kernel<S, float>, g, 256, 0, s, static_cast<const S*>(src), static_cast<float*>(dst), n); break;
    default: return Status::error("convert_cuda: unsupported destination dtype");
  }
  return cuda_status(cudaGetLastError(), "convert_cuda");
}

struct SplitArgs {
  void* dst[4];
  int64_t begin[5];  // column offsets of the outputs in 16-byte chunks; begin[n] = chunks per row
  int n;
};

__global__ void split_cols_kernel(const uint4* src, int64_t chunks, SplitArgs a) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= chunks) return;
  const int64_t row = i / a.begin[a.n], c = i % a.begin[a.n];
  int o = 0;
  while (c >= a.begin[o + 1]) ++o;
  const int64_t w = a.begin[o + 1] - a.begin[o];
  static_cast<uint4*>(a.dst[o])[row * w + c - a.begin[o]] = src[i];
}

}  // namespace

Status add_cuda(const void* a, const void* b, void* out, int64_t n, cudaStream_t s) {
  if (n == 0) return Status::ok();
  cuda::launch(add_kernel, cuda::blocks_for(n, 256), 256, 0, s, static_cast<const bf16*>(a), static_cast<const bf16*>(b),
                                                       static_cast<bf16*>(out), n);
  return cuda_status(cudaGetLastError(), "add_cuda");
}

Status scale_cuda(void* x, float scale, int64_t n, cudaStream_t s) {
  if (n == 0) return Status::ok();
  cuda::launch(scale_kernel, cuda::blocks_for(n, 256), 256, 0, s, static_cast<bf16*>(x), scale, n);
  return cuda_status(cudaGetLastError(), "scale_cuda");
}

Status fill_uniform_cuda(void* x, int64_t n, uint64_t seed, float scale, float offset, cudaStream_t s) {
  if (n == 0) return Status::ok();
  cuda::launch(fill_uniform_kernel, cuda::blocks_for(n, 256), 256, 0, s, static_cast<bf16*>(x), n, seed, scale, offset);
  return cuda_status(cudaGetLastError(), "fill_uniform_cuda");
}

Status convert_cuda(const void* src, DType st, void* dst, DType dt, int64_t n, cudaStream_t s) {
  if (n == 0) return Status::ok();
  switch (st) {
    case DType::kBF16: return convert_to<bf16>(src, dst, dt, n, s);
    case DType::kF16: return convert_to<f16>(src, dst, dt, n, s);
    case DType::kF32: return convert_to<float>(src, dst, dt, n, s);
    default: return Status::error("convert_cuda: unsupported source dtype");
  }
}

Status split_cols_cuda(const void* src, int64_t rows, void* const* dst, const int64_t* widths, int n, cudaStream_t s) {
  if (n < 1 || n > 4) return Status::error("split_cols_cuda: 1 to 4 outputs");
  SplitArgs a{};
  a.n = n;
  for (int i = 0; i < n; ++i) {
    if (widths[i] % 8 != 0) return Status::error("split_cols_cuda: widths must be multiples of 8");
    a.dst[i] = dst[i];
    a.begin[i + 1] = a.begin[i] + widths[i] / 8;
  }
  const int64_t chunks = rows * a.begin[n];
  if (chunks == 0) return Status::ok();
  cuda::launch(split_cols_kernel, cuda::blocks_for(chunks, 256), 256, 0, s, static_cast<const uint4*>(src), chunks, a);
  return cuda_status(cudaGetLastError(), "split_cols_cuda");
}

}  // namespace dg
