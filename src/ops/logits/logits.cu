#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/logits/logits_cuda.h"

namespace dg {
namespace {

// One logit: rounded to bf16 (the reference's storage), then capped (cap <= 0: no cap).
__device__ __forceinline__ float softcapped(float x, float cap) {
  const float l = cuda::rbf(x);
  return cap > 0.0f ? tanhf(l / cap) * cap : l;
}

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

}  // namespace

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
