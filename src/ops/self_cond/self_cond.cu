#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "ops/self_cond/self_cond.h"

namespace dg {
namespace {

using cuda::bf16;
constexpr int kThreads = 256;

__device__ float block_reduce(float v, bool is_max, float* sh) {
  for (int off = 16; off > 0; off >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    float t = threadIdx.x < kThreads / 32 ? sh[threadIdx.x] : (is_max ? -INFINITY : 0.0f);
    for (int off = 16; off > 0; off >>= 1) {
      const float o = __shfl_xor_sync(0xffffffffu, t, off);
      t = is_max ? fmaxf(t, o) : t + o;
    }
    if (threadIdx.x == 0) sh[0] = t;
  }
  __syncthreads();
  const float r = sh[0];
  __syncthreads();
  return r;
}

__global__ void soft_probs_kernel(const bf16* x, int64_t vocab, float cutoff, bf16* p) {
  __shared__ float sh[kThreads / 32];
  const bf16* row = x + blockIdx.x * vocab;
  bf16* out = p + blockIdx.x * vocab;
  float mx = -INFINITY;
  for (int64_t v = threadIdx.x; v < vocab; v += kThreads) mx = fmaxf(mx, __bfloat162float(row[v]));
  mx = block_reduce(mx, true, sh);
  float sum = 0.0f;
  for (int64_t v = threadIdx.x; v < vocab; v += kThreads) sum += expf(__bfloat162float(row[v]) - mx);
  sum = block_reduce(sum, false, sh);
  const float inv = 1.0f / sum;
  const float floor = cutoff > 0.0f ? cutoff * inv : 0.0f;  // p_max = 1 / sum
  for (int64_t v = threadIdx.x; v < vocab; v += kThreads) {
    const float pr = cuda::rbf(expf(__bfloat162float(row[v]) - mx) * inv);
    out[v] = __float2bfloat16_rn(pr >= floor ? pr : 0.0f);
  }
}

}  // namespace

Status soft_probs_cuda(const void* logits, int64_t rows, int64_t vocab, float sparse_cutoff, void* probs,
                       cudaStream_t s) {
  if (rows == 0) return Status::ok();
  soft_probs_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(static_cast<const bf16*>(logits), vocab,
                                                                       sparse_cutoff, static_cast<bf16*>(probs));
  return cuda_status(cudaGetLastError(), "soft_probs_cuda");
}

}  // namespace dg
