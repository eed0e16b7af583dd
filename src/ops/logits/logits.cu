#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/logits/logits_cuda.h"

namespace dg {
namespace {

__global__ void softcap_kernel(float* x, int64_t n, float cap) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float l = cuda::rbf(x[i]);
  x[i] = cap > 0.0f ? tanhf(l / cap) * cap : l;
}

}  // namespace

Status softcap_cuda(float* logits, int64_t n, float cap, cudaStream_t s) {
  if (n == 0) return Status::ok();
  cuda::launch(softcap_kernel, cuda::blocks_for(n, 256), 256, 0, s, logits, n, cap);
  return cuda_status(cudaGetLastError(), "softcap_cuda");
}

}  // namespace dg
