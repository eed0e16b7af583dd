#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/logits/logits_cuda.h"
#include "ops/logits/softcap.cuh"

namespace dg {
namespace {

using cuda::softcapped;
using cuda::softcapped_scaled;

__global__ void softcap_kernel(float* x, int64_t n, float cap) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  x[i] = softcapped(x[i], cap);
}

// The same, four logits per thread with 16-byte accesses (n % 4 == 0, aligned): the same value per element.
__global__ void softcap_vec_kernel(float4* x, int64_t n4, float cap) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n4) return;
  float4 q = x[i];
  float* e = reinterpret_cast<float*>(&q);
#pragma unroll
  for (int k = 0; k < 4; ++k) e[k] = softcapped(e[k], cap);
  x[i] = q;
}

// Block (x, y): 256 float4 of row y's sums, scaled by the row's and the columns' scales, then capped.
__global__ void softcap_scaled_kernel(float4* x, int64_t vocab4, const float* row_scale, const float4* col_scale,
                                      float cap) {
  cuda::pdl_enter();
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= vocab4) return;
  const int64_t i = blockIdx.y * vocab4 + c;
  const float rs = row_scale[blockIdx.y];
  const float4 cs = col_scale[c];
  float4 q = x[i];
  q.x = softcapped_scaled(q.x, rs, cs.x, cap);
  q.y = softcapped_scaled(q.y, rs, cs.y, cap);
  q.z = softcapped_scaled(q.z, rs, cs.z, cap);
  q.w = softcapped_scaled(q.w, rs, cs.w, cap);
  x[i] = q;
}

}  // namespace

Status softcap_scaled_cuda(float* logits, int64_t rows, int64_t vocab, const float* row_scale, const float* col_scale,
                           float cap, cudaStream_t s) {
  if (rows * vocab == 0) return Status::ok();
  const auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  if (vocab % 4 != 0 || rows > 65535 || !aligned(logits) || !aligned(col_scale))
    return Status::error("softcap_scaled_cuda: needs vocab % 4 == 0, at most 65,535 rows and 16-byte aligned sums "
                         "and scales");
  const dim3 grid(static_cast<unsigned>(cuda::blocks_for(vocab / 4, 256)), static_cast<unsigned>(rows));
  cuda::launch(softcap_scaled_kernel, grid, 256, 0, s, reinterpret_cast<float4*>(logits), vocab / 4, row_scale,
               reinterpret_cast<const float4*>(col_scale), cap);
  return cuda_status(cudaGetLastError(), "softcap_scaled_cuda");
}

Status softcap_cuda(float* logits, int64_t n, float cap, cudaStream_t s) {
  if (n == 0) return Status::ok();
  if (cap > 0.0f && n % 4 == 0 && (reinterpret_cast<uintptr_t>(logits) & 15) == 0) {
    cuda::launch(softcap_vec_kernel, cuda::blocks_for(n / 4, 256), 256, 0, s, reinterpret_cast<float4*>(logits),
                 n / 4, cap);
    return cuda_status(cudaGetLastError(), "softcap_cuda");
  }
  cuda::launch(softcap_kernel, cuda::blocks_for(n, 256), 256, 0, s, logits, n, cap);
  return cuda_status(cudaGetLastError(), "softcap_cuda");
}

}  // namespace dg
