// The selection kernel of top-k attention (attention_topk.h), after the GEMM path's Q K^T: one block per (head,
// query row). Four radix passes (8 bits each, most significant first) over the row's order keys find the k-th
// ranked key T and how many keys equal to T are kept; a block scan emits the kept positions in position order (every
// key above T, then the first keys equal to T: ties to the lower position); the f32 softmax and P V over the gathered
// values run over that list. Plain on purpose: every pass re-reads the row's scores (from L2 at the sizes that
// matter); docs/ATTENTION.md says how it is measured.
#include <cub/block/block_scan.cuh>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/attention/attention_topk_cuda.h"

namespace dg {
namespace {

using cuda::bf16;

constexpr int kThreads = 256;
constexpr int kDimsPerThread = 4;  // head dims up to kThreads * 4 = 1024

__global__ void __launch_bounds__(kThreads)
    topk_kernel(const float* __restrict__ scores, const bf16* __restrict__ v, int64_t heads, int64_t rows, int64_t S,
                int64_t n_kv, int64_t D, int64_t q_pos0, int64_t key_pos0, bool causal, int64_t window, AttnTopk topk,
                bf16* __restrict__ out) {
  cuda::pdl_enter();
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ unsigned hist[256];
  __shared__ int kept[kAttnTopkMax];      // key indices, ascending
  __shared__ float prob[kAttnTopkMax];    // their unnormalised probabilities
  __shared__ float red[kThreads / 32];
  __shared__ uint32_t pick_prefix;
  __shared__ int pick_need;

  const int tid = static_cast<int>(threadIdx.x);
  const int64_t hr = blockIdx.x;  // head * rows + r
  const int64_t h = hr / rows, r = hr % rows, kvh = h / (heads / n_kv);
  const int64_t qp = q_pos0 + r;
  const float* x = scores + hr * S;
  // The visible keys are one interval [lo, hi) of key indices.
  int64_t lo = 0, hi = S;
  if (causal) {
    const int64_t last = qp - key_pos0;  // the query's own position
    hi = last + 1 < S ? last + 1 : S;
    if (window > 0 && last - window + 1 > 0) lo = last - window + 1;
  }
  const int64_t n_vis = hi > lo ? hi - lo : 0;
  const int keep = static_cast<int>(topk.keep(n_vis));
  bf16* o = out + (r * heads + h) * D;

  // 1. The k-th ranked order key T (all = every visible key is kept) and how many keys equal to T stay.
  const bool all = keep >= n_vis;
  uint32_t prefix = 0, mask = 0;
  int need = keep;
  for (int shift = 24; shift >= 0 && !all; shift -= 8) {
    for (int i = tid; i < 256; i += kThreads) hist[i] = 0;
    __syncthreads();
    for (int64_t j = lo + tid; j < hi; j += kThreads) {
      const uint32_t u = attn_topk_order_key(x[j]);
      if ((u & mask) == prefix) atomicAdd(&hist[(u >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (tid == 0) {  // walk the bins from the top until `need` keys are covered
      unsigned above = 0;
      int b = 255;
      for (; b > 0; --b) {
        if (above + hist[b] >= static_cast<unsigned>(need)) break;
        above += hist[b];
      }
      pick_prefix = prefix | (static_cast<uint32_t>(b) << shift);
      pick_need = need - static_cast<int>(above);
    }
    __syncthreads();
    prefix = pick_prefix;
    need = pick_need;
    mask |= 255u << shift;
    __syncthreads();  // every thread has read pick_* before thread 0 writes them again
  }
  const uint32_t T = prefix;

  // 2. The kept keys in position order: above T, or equal to T among the first `need` such.
  int n_kept = 0, ties_before = 0;
  for (int64_t j0 = lo; j0 < hi && n_kept < keep; j0 += kThreads) {
    const int64_t j = j0 + tid;
    int above = 0, tie = 0;
    if (j < hi) {
      const uint32_t u = attn_topk_order_key(x[j]);
      above = all || u > T;
      tie = !all && u == T;
    }
    int tie_rank = 0, ties = 0;
    Scan(scan_tmp).ExclusiveSum(tie, tie_rank, ties);
    __syncthreads();
    const int take = above || (tie && ties_before + tie_rank < need);
    int slot = 0, taken = 0;
    Scan(scan_tmp).ExclusiveSum(take, slot, taken);
    __syncthreads();
    if (take) kept[n_kept + slot] = static_cast<int>(j);
    n_kept += taken;
    ties_before += ties;
  }
  __syncthreads();

  // 3. Softmax over the kept scores (f32), then P V over their gathered value rows.
  float mx = -INFINITY;
  for (int i = tid; i < n_kept; i += kThreads) mx = fmaxf(mx, x[kept[i]]);
  mx = cuda::block_reduce<kThreads>(mx, true, red);
  float sum = 0.0f;
  for (int i = tid; i < n_kept; i += kThreads) {
    const float e = expf(x[kept[i]] - mx);
    prob[i] = e;
    sum += e;
  }
  sum = cuda::block_reduce<kThreads>(sum, false, red);  // its barriers also publish prob[]
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  float acc[kDimsPerThread] = {};
  for (int i = 0; i < n_kept; ++i) {
    const float p = prob[i];
    const bf16* vr = v + (static_cast<int64_t>(kept[i]) * n_kv + kvh) * D;
#pragma unroll
    for (int c = 0; c < kDimsPerThread; ++c) {
      const int64_t d = tid + c * kThreads;
      if (d < D) acc[c] += p * __bfloat162float(vr[d]);
    }
  }
#pragma unroll
  for (int c = 0; c < kDimsPerThread; ++c) {
    const int64_t d = tid + c * kThreads;
    if (d < D) o[d] = __float2bfloat16_rn(acc[c] * inv);
  }
}

}  // namespace

Status attention_topk_select_cuda(const float* scores, const void* v, int64_t heads, int64_t rows, int64_t S,
                                  int64_t n_kv, int64_t head_dim, int64_t q_pos0, int64_t key_pos0, bool causal,
                                  int64_t window, const AttnTopk& topk, void* out, cudaStream_t s) {
  if (!topk.on()) return Status::error("attention_topk_select_cuda: top-k is off (dense attention runs elsewhere)");
  if (topk.mode == AttnTopk::Mode::kFixed && (topk.k < 1 || topk.k > kAttnTopkMax))
    return Status::error("attention_topk_select_cuda: k " + std::to_string(topk.k) + " is outside 1.." +
                         std::to_string(kAttnTopkMax));
  if (head_dim < 1 || head_dim > kThreads * kDimsPerThread)
    return Status::error("attention_topk_select_cuda: head_dim " + std::to_string(head_dim) + " above " +
                         std::to_string(kThreads * kDimsPerThread));
  if (n_kv <= 0 || heads % n_kv != 0) return Status::error("attention_topk_select_cuda: bad GQA shape");
  if (S > INT32_MAX) return Status::error("attention_topk_select_cuda: more than 2^31 keys");
  if (heads * rows == 0) return Status::ok();
  cuda::launch(topk_kernel, static_cast<unsigned>(heads * rows), kThreads, 0, s, 
      scores, static_cast<const bf16*>(v), heads, rows, S, n_kv, head_dim, q_pos0, key_pos0, causal, window, topk,
      static_cast<bf16*>(out));
  return cuda_status(cudaGetLastError(), "attention_topk_select_cuda");
}

}  // namespace dg
