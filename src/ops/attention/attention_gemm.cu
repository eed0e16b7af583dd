// Kernels around the GEMM attention path: the key/value gather and the masked softmax (see attention.h).
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/attention/attention_cuda.h"

namespace dg {
namespace {

using cuda::bf16;
using cuda::f16;

__global__ void gather_kernel(const f16* ck, const f16* cv, int64_t cap, bool ring, int64_t from, int64_t n_cached,
                              const bf16* kf, const bf16* vf, int64_t row_elems, bf16* ko, bf16* vo, int64_t total) {
  cuda::pdl_enter();
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= total) return;
  const int64_t j = t / row_elems, e = t % row_elems;
  if (j < n_cached) {
    const int64_t p = from + j;
    const int64_t slot = ring ? p % cap : p;
    ko[t] = __float2bfloat16_rn(__half2float(ck[slot * row_elems + e]));
    vo[t] = __float2bfloat16_rn(__half2float(cv[slot * row_elems + e]));
  } else {
    const int64_t i = (j - n_cached) * row_elems + e;
    ko[t] = kf[i];
    vo[t] = vf[i];
  }
}

constexpr int kThreads = 256;

// One block per (head, query row).
__global__ void softmax_kernel(const float* scores, int64_t rows, int64_t S, int64_t q_pos0, int64_t key_pos0,
                               bool causal, int64_t window, bf16* probs) {
  cuda::pdl_enter();
  __shared__ float sh[kThreads / 32];
  const int64_t hr = blockIdx.x;  // head * rows + r
  const int64_t r = hr % rows;
  const int64_t qp = q_pos0 + r;
  const float* x = scores + hr * S;
  bf16* p = probs + hr * S;
  auto visible = [&](int64_t j) {
    const int64_t kp = key_pos0 + j;
    return !causal || (kp <= qp && (window <= 0 || kp > qp - window));
  };
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < S; j += kThreads)
    if (visible(j)) mx = fmaxf(mx, x[j]);
  mx = cuda::block_reduce<kThreads>(mx, true, sh);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < S; j += kThreads)
    if (visible(j)) sum += expf(x[j] - mx);
  sum = cuda::block_reduce<kThreads>(sum, false, sh);
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  for (int64_t j = threadIdx.x; j < S; j += kThreads)
    p[j] = __float2bfloat16_rn(visible(j) ? expf(x[j] - mx) * inv : 0.0f);
}

}  // namespace

Status attention_gather_cuda(const CachedKv& cached, const void* k_fresh, const void* v_fresh, int64_t n_fresh,
                             int64_t row_elems, void* k_out, void* v_out, cudaStream_t s) {
  const int64_t n_cached = cached.to - cached.from;
  const int64_t total = (n_cached + n_fresh) * row_elems;
  if (total == 0) return Status::ok();
  cuda::launch(gather_kernel, cuda::blocks_for(total, 256), 256, 0, s, 
      static_cast<const f16*>(cached.k), static_cast<const f16*>(cached.v), cached.cap, cached.ring, cached.from,
      n_cached, static_cast<const bf16*>(k_fresh), static_cast<const bf16*>(v_fresh), row_elems,
      static_cast<bf16*>(k_out), static_cast<bf16*>(v_out), total);
  return cuda_status(cudaGetLastError(), "attention_gather_cuda");
}

Status attention_softmax_cuda(const float* scores, int64_t heads, int64_t rows, int64_t S, int64_t q_pos0,
                              int64_t key_pos0, bool causal, int64_t window, void* probs, cudaStream_t s) {
  if (heads * rows == 0) return Status::ok();
  cuda::launch(softmax_kernel, static_cast<unsigned>(heads * rows), kThreads, 0, s, scores, rows, S, q_pos0, key_pos0, causal,
                                                                          window, static_cast<bf16*>(probs));
  return cuda_status(cudaGetLastError(), "attention_softmax_cuda");
}

}  // namespace dg
