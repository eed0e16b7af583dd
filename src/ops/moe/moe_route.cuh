// The MoE routing's device pieces (moe_route.cu's kernels; for a kernel that routes as part of its work): a warp's
// routing of one row, the experts' scan, and the grouping by the last block of a launch from the units' pair codes
// and counts (a unit: the rows one block routed).
// Reference: DiffusionGemmaTextRouter (softmax, top-k, renormalisation, per_expert_scale); moe_route_cpu.
#pragma once

#include <cstdint>

#include "core/cuda/cuda_common.cuh"

namespace dg::moe_route {

using cuda::bf16;

constexpr int64_t kGroupMaxExperts = 256;
constexpr int kUnitMaxTopK = 16;
constexpr int64_t kUnitMaxPrefixWords = 8192;  // the last block's per-unit prefixes in shared memory (32 KB)

// One warp routes one row: softmax over the experts, then top_k rounds of a warp argmax (ties to the lower index),
// the chosen probabilities renormalised and times per_expert_scale. p: the warp's n_exp floats of scratch;
// idx_row, w_row: the row's top_k outputs (global or shared memory). Every lane must call it.
__device__ __forceinline__ void route_row(const bf16* s_row, int64_t n_exp, int top_k, const bf16* pes, float* p,
                                          int32_t* idx_row, float* w_row) {
  const int lane = threadIdx.x & 31;
  float mx = -INFINITY;
  for (int64_t e = lane; e < n_exp; e += 32) mx = fmaxf(mx, __bfloat162float(s_row[e]));
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  float sum = 0.0f;
  for (int64_t e = lane; e < n_exp; e += 32) {
    const float v = expf(__bfloat162float(s_row[e]) - mx);
    p[e] = v;
    sum += v;
  }
  sum = cuda::warp_sum(sum);
  for (int64_t e = lane; e < n_exp; e += 32) p[e] /= sum;
  __syncwarp();
  float wsum = 0.0f;  // the same in every lane, as each round's winner is
  for (int k = 0; k < top_k; ++k) {
    float best = -1.0f;
    int best_e = 0x7fffffff;
    for (int64_t e = lane; e < n_exp; e += 32)
      if (p[e] > best) {  // strict: within a lane the lower index wins ties
        best = p[e];
        best_e = static_cast<int>(e);
      }
    cuda::warp_argmax(best, best_e);
    if (lane == 0) {
      idx_row[k] = best_e;
      w_row[k] = best;
      p[best_e] = -2.0f;  // taken
    }
    wsum += best;
    __syncwarp();  // orders lane 0's writes before the next round's reads and the renormalisation below
  }
  for (int k = lane; k < top_k; k += 32) w_row[k] = (w_row[k] / wsum) * __bfloat162float(pes[idx_row[k]]);
  __syncwarp();  // p may be reused by the warp's next row
}

// Exclusive scan of tot [n_exp] (shared) in place by warp 0, each lane a contiguous chunk of experts; the counts
// and offsets (offsets[n_exp]: every pair) written out. The whole block calls it.
__device__ __forceinline__ void group_scan_experts(int32_t* tot, int n_exp, int32_t* counts, int32_t* offsets) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (warp == 0) {
    const int chunk = (n_exp + 31) / 32, e0 = lane * chunk, e1 = e0 + chunk < n_exp ? e0 + chunk : n_exp;
    int32_t sum = 0;
    for (int e = e0; e < e1; ++e) sum += tot[e];
    int32_t incl = sum;
    for (int o = 1; o < 32; o <<= 1) {
      const int32_t v = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += v;
    }
    int32_t at = incl - sum;
    for (int e = e0; e < e1; ++e) {
      const int32_t c = tot[e];
      counts[e] = c;
      tot[e] = at;
      offsets[e] = at;
      at += c;
    }
    if (lane == 31) offsets[n_exp] = incl;
  }
  __syncthreads();
}

// A unit's pairs [p0, p0 + n) with experts s_idx [n] (shared): each written to idx and as its code (the expert and
// its rank among the unit's earlier pairs of that expert, expert | rank << 16), the unit's count per expert to
// blk_row [n_exp]; cnt: n_exp words of shared scratch. The whole block calls it.
__device__ __forceinline__ void unit_codes(const int32_t* s_idx, int n, int64_t p0, int n_exp, int32_t* cnt,
                                           int32_t* idx, int32_t* code, int32_t* blk_row) {
  for (int e = threadIdx.x; e < n_exp; e += blockDim.x) cnt[e] = 0;
  __syncthreads();
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const int e = s_idx[j];
    int before = 0;
    for (int i = 0; i < j; ++i) before += s_idx[i] == e;
    idx[p0 + j] = e;
    code[p0 + j] = e | before << 16;
    atomicAdd(&cnt[e], 1);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < n_exp; e += blockDim.x) blk_row[e] = cnt[e];
}

// Whether this block is the last of `blocks` to arrive at `ticket` (global, 0 before the first): the block's global
// writes are made visible first, and the last block sees every other's. flag: a shared bool. The whole block calls
// it; the caller that gets true sets the ticket back to 0 when done.
__device__ __forceinline__ bool last_arrival(unsigned* ticket, unsigned blocks, bool* flag) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) *flag = atomicAdd(ticket, 1u) == blocks - 1;
  __syncthreads();
  if (!*flag) return false;
  __threadfence();
  return true;
}

// Per expert e, column e of the [n][n_exp] table t (shared memory): its entries become exclusive prefixes down the
// column and tot[e] the column's total. The whole block calls it; the caller synchronises before and after.
__device__ __forceinline__ void column_prefixes(int32_t* t, int n, int n_exp, int32_t* tot) {
  for (int e = threadIdx.x; e < n_exp; e += blockDim.x) {
    int32_t total = 0;
    for (int b = 0; b < n; ++b) {
      const int32_t c = t[b * n_exp + e];
      t[b * n_exp + e] = total;
      total += c;
    }
    tot[e] = total;
  }
}

// Every index i < n over the block's threads, kBatch a thread at a time: a batch's loads (load(i)) all issued before
// its uses (use(i, value)), so their latencies overlap.
template <class Load, class Use>
__device__ __forceinline__ void batched(int n, Load load, Use use) {
  constexpr int kBatch = 8;
  for (int base = 0; base < n; base += kBatch * blockDim.x) {
    int32_t v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = base + u * blockDim.x + threadIdx.x;
      v[u] = i < n ? load(i) : 0;
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = base + u * blockDim.x + threadIdx.x;
      if (i < n) use(i, v[u]);
    }
  }
}

// The grouping by the last block: units' counts blk [units][n_exp] and the pairs' codes [pairs] (unit_codes, other
// blocks' writes, read from L2 with each thread's loads issued together); pre: (units + 1) * n_exp words of shared
// memory, where per expert the counts become exclusive prefixes over the units and then the expert's total; the
// experts' scan gives counts and offsets; every pair placed. unit_pairs: the pairs of every unit but the last.
__device__ __forceinline__ void group_last_block(const int32_t* blk, const int32_t* code, int units, int n_exp,
                                                 int pairs, int unit_pairs, int32_t* pre, int32_t* counts,
                                                 int32_t* offsets, int32_t* perm, int32_t* inv) {
  int32_t* tot = pre + units * n_exp;
  batched(units * n_exp, [&](int i) { return __ldcg(blk + i); }, [&](int i, int32_t c) { pre[i] = c; });
  __syncthreads();
  column_prefixes(pre, units, n_exp, tot);
  __syncthreads();
  group_scan_experts(tot, n_exp, counts, offsets);
  batched(pairs, [&](int p) { return __ldcg(code + p); }, [&](int p, int32_t c) {
    const int e = c & 0xffff;
    const int32_t pos = tot[e] + pre[p / unit_pairs * n_exp + e] + (c >> 16);
    perm[pos] = p;
    inv[p] = pos;
  });
}

}  // namespace dg::moe_route
