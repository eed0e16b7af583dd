#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/rope/rope_cuda.h"

namespace dg {
namespace {

using cuda::rbf;

__global__ void rope_kernel(cuda::bf16* x, int64_t heads, int64_t head_dim, int64_t pos0, const float* inv_freq,
                            int64_t total) {
  cuda::pdl_enter();
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;  // over rows * heads * half
  if (t >= total) return;
  const int64_t half = head_dim / 2;
  const int64_t i = t % half, rh = t / half, row = rh / heads;
  const float ang = static_cast<float>(pos0 + row) * inv_freq[i];
  const float c = rbf(cosf(ang)), sn = rbf(sinf(ang));
  cuda::bf16* v = x + rh * head_dim;
  const float a = __bfloat162float(v[i]), b = __bfloat162float(v[i + half]);
  v[i] = __float2bfloat16_rn(rbf(a * c) + rbf(-b * sn));
  v[i + half] = __float2bfloat16_rn(rbf(b * c) + rbf(a * sn));
}

}  // namespace

Status rope_cuda(void* x, int64_t rows, int64_t heads, int64_t head_dim, int64_t pos0, const float* inv_freq,
                 cudaStream_t s) {
  const int64_t total = rows * heads * (head_dim / 2);
  if (total == 0) return Status::ok();
  cuda::launch(rope_kernel, cuda::blocks_for(total, 256), 256, 0, s, static_cast<cuda::bf16*>(x), heads, head_dim, pos0,
                                                           inv_freq, total);
  return cuda_status(cudaGetLastError(), "rope_cuda");
}

}  // namespace dg
