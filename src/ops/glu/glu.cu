#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/glu/glu_cuda.h"

namespace dg {
namespace {

using cuda::bf16;

__global__ void gelu_mul_kernel(const bf16* gate, const bf16* up, bf16* out, int64_t n) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float g = cuda::rbf(cuda::gelu_tanh(__bfloat162float(gate[i])));
  out[i] = __float2bfloat16_rn(g * __bfloat162float(up[i]));
}

__global__ void gelu_mul_split_kernel(const bf16* gu, int64_t ff, bf16* out, int64_t n) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int64_t r = i / ff, f = i % ff;
  const float g = cuda::rbf(cuda::gelu_tanh(__bfloat162float(gu[r * 2 * ff + f])));
  out[i] = __float2bfloat16_rn(g * __bfloat162float(gu[r * 2 * ff + ff + f]));
}

__global__ void gelu_mul_split_scaled_kernel(const bf16* gu, int64_t ff, int64_t ld, int64_t up_col, const float* xs,
                                             const float* gs, const float* us, bf16* out, int64_t n) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int64_t r = i / ff, f = i % ff;
  const float x = xs[r];
  const float g = cuda::rbf(cuda::gelu_tanh(__bfloat162float(gu[r * ld + f]) * x * gs[f]));
  out[i] = __float2bfloat16_rn(g * (__bfloat162float(gu[r * ld + up_col + f]) * x * us[f]));
}

}  // namespace

Status gelu_mul_cuda(const void* gate, const void* up, void* out, int64_t n, cudaStream_t s) {
  if (n == 0) return Status::ok();
  cuda::launch(gelu_mul_kernel, cuda::blocks_for(n, 256), 256, 0, s, static_cast<const bf16*>(gate),
                                                           static_cast<const bf16*>(up), static_cast<bf16*>(out), n);
  return cuda_status(cudaGetLastError(), "gelu_mul_cuda");
}

Status gelu_mul_split_cuda(const void* gate_up, int64_t rows, int64_t ff, void* out, cudaStream_t s) {
  const int64_t n = rows * ff;
  if (n == 0) return Status::ok();
  cuda::launch(gelu_mul_split_kernel, cuda::blocks_for(n, 256), 256, 0, s, static_cast<const bf16*>(gate_up), ff,
                                                                 static_cast<bf16*>(out), n);
  return cuda_status(cudaGetLastError(), "gelu_mul_split_cuda");
}

Status gelu_mul_split_scaled_cuda(const void* gate_up, int64_t rows, int64_t ff, int64_t ld, int64_t up_col,
                                  const float* x_scale, const float* gate_scale, const float* up_scale, void* out,
                                  cudaStream_t s) {
  const int64_t n = rows * ff;
  if (n == 0) return Status::ok();
  if (up_col < ff || ld < up_col + ff) return Status::error("gelu_mul_split_scaled_cuda: up's columns overlap gate's "
                                                          "or pass the row");
  cuda::launch(gelu_mul_split_scaled_kernel, cuda::blocks_for(n, 256), 256, 0, s, static_cast<const bf16*>(gate_up),
               ff, ld, up_col, x_scale, gate_scale, up_scale, static_cast<bf16*>(out), n);
  return cuda_status(cudaGetLastError(), "gelu_mul_split_scaled_cuda");
}

}  // namespace dg
