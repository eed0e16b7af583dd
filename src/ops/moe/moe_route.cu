// The MoE router's top-k on the scores and the stable grouping of the routed pairs by expert (moe_cuda.h:
// moe_route_cuda, moe_group_cuda), and both in one launch of many blocks whose last groups (moe_route_group_cuda;
// both in one block measured 4x slower than the two launches at one canvas: docs/NEGATIVE.md).
// Reference: DiffusionGemmaTextRouter (softmax, top-k, renormalisation, per_expert_scale); moe_route_cpu.
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/moe/moe_cuda.h"

namespace dg {
namespace {

using cuda::bf16;

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

// One warp per row.
__global__ void route_kernel(const bf16* scores, int64_t rows, int64_t n_exp, int top_k, const bf16* pes, int32_t* idx,
                             float* weight) {
  cuda::pdl_enter();
  extern __shared__ float smem[];
  const int warp = threadIdx.x >> 5;
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x >> 5) + warp;
  if (r >= rows) return;
  route_row(scores + r * n_exp, n_exp, top_k, pes, smem + warp * n_exp, idx + r * top_k, weight + r * top_k);
}

__global__ void group_count_kernel(const int32_t* idx, int64_t pairs, int64_t n_exp, int32_t* counts) {
  cuda::pdl_enter();
  const int lane = threadIdx.x & 31;
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (e >= n_exp) return;
  int c = 0;
  for (int64_t base = 0; base < pairs; base += 32) {
    const int64_t p = base + lane;
    c += __popc(__ballot_sync(0xffffffffu, p < pairs && idx[p] == e));
  }
  if (lane == 0) counts[e] = c;
}

__global__ void group_place_kernel(const int32_t* idx, int64_t pairs, int64_t n_exp, const int32_t* counts,
                                   int32_t* offsets, int32_t* perm, int32_t* inv) {
  cuda::pdl_enter();
  const int lane = threadIdx.x & 31;
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (e >= n_exp) return;
  int before = 0;
  for (int64_t j = lane; j < e; j += 32) before += counts[j];
  for (int off = 16; off > 0; off >>= 1) before += __shfl_xor_sync(0xffffffffu, before, off);
  int running = 0;
  for (int64_t base = 0; base < pairs; base += 32) {
    const int64_t p = base + lane;
    const bool hit = p < pairs && idx[p] == e;
    const unsigned mask = __ballot_sync(0xffffffffu, hit);
    if (hit) {
      const int pos = before + running + __popc(mask & ((1u << lane) - 1u));
      perm[pos] = static_cast<int32_t>(p);
      inv[p] = pos;
    }
    running += __popc(mask);
  }
  if (lane == 0) {
    offsets[e] = before;
    if (e == n_exp - 1) offsets[n_exp] = before + running;
  }
}

// The same stable grouping by blocks of kGroupWarps warps, for n_exp <= kGroupMaxExperts: a block takes a
// contiguous range of pairs and warp w of it a contiguous part (whole steps of 32, in order), so a pair's position is
// its expert's offset + the expert's pairs in earlier blocks + in earlier warps of its block + earlier in its own
// part + its rank among equal lanes of its step (__match_any_sync). One block does it all for up to kGroupOneBlock
// pairs (one canvas: 2,048); more pairs take blocks of kGroupBlockPairs each and three launches (count, scan, place):
// one block sorted the 32-canvas step's 65,536 pairs in 143.5 µs a layer (docs/PERFORMANCE-12-04.md).
constexpr int kGroupWarps = 32;
constexpr int64_t kGroupMaxExperts = 256;
constexpr int64_t kGroupOneBlock = 8192, kGroupBlockPairs = 2048;

__host__ __device__ constexpr int64_t group_smem_words(int64_t n_exp) { return (kGroupWarps + 1) * n_exp; }

// Warp w's part of the block's pairs [b0, b1): whole steps of 32 in order (empty past the end).
__device__ __forceinline__ void warp_part(int64_t b0, int64_t b1, int warp, int64_t& begin, int64_t& end) {
  const int64_t per = (b1 - b0 + kGroupWarps * 32 - 1) / (kGroupWarps * 32) * 32;
  begin = b0 + warp * per;
  end = begin + per < b1 ? begin + per : b1;
}

// Pass 1 over the block's pairs [b0, b1): run [kGroupWarps][n_exp] (shared) ends as each warp's exclusive prefix of
// its expert counts over the block's earlier warps, tot [n_exp] (shared) as the block's count per expert. The whole
// block calls it; it starts by zeroing run, so a caller that used the shared memory before must sync first.
__device__ __forceinline__ void group_block_counts(const int32_t* idx, int64_t b0, int64_t b1, int n_exp,
                                                   int32_t* run, int32_t* tot) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const unsigned lower = (1u << lane) - 1u;
  for (int i = threadIdx.x; i < kGroupWarps * n_exp; i += blockDim.x) run[i] = 0;
  __syncthreads();
  int64_t begin, end;
  warp_part(b0, b1, warp, begin, end);
  int32_t* mine = run + warp * n_exp;
  for (int64_t base = begin; base < end; base += 32) {
    const int64_t p = base + lane;
    const int e = p < end ? idx[p] : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    if (e >= 0 && (peers & lower) == 0) mine[e] += __popc(peers);  // the group's lowest lane counts it
    __syncwarp();
  }
  __syncthreads();
  for (int e = threadIdx.x; e < n_exp; e += blockDim.x) {  // per expert: exclusive prefix over the warps
    int32_t total = 0;
    for (int w = 0; w < kGroupWarps; ++w) {
      const int32_t c = run[w * n_exp + e];
      run[w * n_exp + e] = total;
      total += c;
    }
    tot[e] = total;
  }
  __syncthreads();
}

// Pass 2 over the block's pairs [b0, b1) with group_block_counts' run and base [n_exp] (shared): the position of the
// block's first pair of each expert.
__device__ __forceinline__ void group_block_place(const int32_t* idx, int64_t b0, int64_t b1, int n_exp,
                                                  int32_t* run, const int32_t* base, int32_t* perm, int32_t* inv) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const unsigned lower = (1u << lane) - 1u;
  int64_t begin, end;
  warp_part(b0, b1, warp, begin, end);
  int32_t* mine = run + warp * n_exp;
  for (int64_t step = begin; step < end; step += 32) {
    const int64_t p = step + lane;
    const int e = p < end ? idx[p] : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    if (e >= 0) {
      const int32_t pos = base[e] + mine[e] + __popc(peers & lower);
      perm[pos] = static_cast<int32_t>(p);
      inv[p] = pos;
    }
    __syncwarp();
    if (e >= 0 && (peers & lower) == 0) mine[e] += __popc(peers);
    __syncwarp();
  }
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

// Every pair in one block (gsm: group_smem_words(n_exp) int32 of shared memory).
__global__ void __launch_bounds__(kGroupWarps * 32) group_block_kernel(const int32_t* idx, int64_t pairs, int n_exp,
                                                                      int32_t* counts, int32_t* offsets,
                                                                      int32_t* perm, int32_t* inv) {
  cuda::pdl_enter();
  extern __shared__ int32_t gsm[];
  int32_t *run = gsm, *tot = gsm + kGroupWarps * n_exp;
  group_block_counts(idx, 0, pairs, n_exp, run, tot);
  group_scan_experts(tot, n_exp, counts, offsets);
  group_block_place(idx, 0, pairs, n_exp, run, tot, perm, inv);
}

// Blocks of kGroupBlockPairs pairs, launch 1 of 3: block b's count per expert into blk [blocks][n_exp].
__global__ void __launch_bounds__(kGroupWarps * 32) group_blocks_count_kernel(const int32_t* idx, int64_t pairs,
                                                                             int n_exp, int32_t* blk) {
  cuda::pdl_enter();
  extern __shared__ int32_t gsm[];
  int32_t *run = gsm, *tot = gsm + kGroupWarps * n_exp;
  const int64_t b0 = blockIdx.x * kGroupBlockPairs, b1 = b0 + kGroupBlockPairs < pairs ? b0 + kGroupBlockPairs : pairs;
  group_block_counts(idx, b0, b1, n_exp, run, tot);
  for (int e = threadIdx.x; e < n_exp; e += blockDim.x) blk[blockIdx.x * static_cast<int64_t>(n_exp) + e] = tot[e];
}

// Launch 2 of 3, one block: per expert, its count over the blocks and blk's entries become exclusive prefixes over
// the blocks; the experts' scan gives counts and offsets, and blk each block's first position per expert.
__global__ void __launch_bounds__(kGroupWarps * 32) group_blocks_scan_kernel(int blocks, int n_exp, int32_t* blk,
                                                                            int32_t* counts, int32_t* offsets) {
  cuda::pdl_enter();
  extern __shared__ int32_t gsm[];
  int32_t* tot = gsm;
  for (int e = threadIdx.x; e < n_exp; e += blockDim.x) {
    int32_t total = 0;
    for (int b = 0; b < blocks; ++b) {
      const int32_t c = blk[b * static_cast<int64_t>(n_exp) + e];
      blk[b * static_cast<int64_t>(n_exp) + e] = total;
      total += c;
    }
    tot[e] = total;
  }
  __syncthreads();
  group_scan_experts(tot, n_exp, counts, offsets);
  for (int e = threadIdx.x; e < n_exp; e += blockDim.x)
    for (int b = 0; b < blocks; ++b) blk[b * static_cast<int64_t>(n_exp) + e] += tot[e];
}

// Launch 3 of 3: block b counts its pairs again (the warps' prefixes) and places them from blk's positions.
__global__ void __launch_bounds__(kGroupWarps * 32) group_blocks_place_kernel(const int32_t* idx, int64_t pairs,
                                                                             int n_exp, const int32_t* blk,
                                                                             int32_t* perm, int32_t* inv) {
  cuda::pdl_enter();
  extern __shared__ int32_t gsm[];
  int32_t *run = gsm, *base = gsm + kGroupWarps * n_exp;
  const int64_t b0 = blockIdx.x * kGroupBlockPairs, b1 = b0 + kGroupBlockPairs < pairs ? b0 + kGroupBlockPairs : pairs;
  group_block_counts(idx, b0, b1, n_exp, run, base);
  for (int e = threadIdx.x; e < n_exp; e += blockDim.x) base[e] = blk[blockIdx.x * static_cast<int64_t>(n_exp) + e];
  __syncthreads();
  group_block_place(idx, b0, b1, n_exp, run, base, perm, inv);
}

// Routing and grouping in one launch (moe_route_group_cuda): blocks of kRgRows warps route a row each as
// route_kernel does, count their pairs per expert into blk [blocks][n_exp] and write each pair's rank among the
// block's earlier pairs of its expert; the last block to finish (a ticket in global memory, which it sets back to 0)
// turns the counts into each block's first position per expert and places every pair, the same stable order as
// group_block_kernel. The routing keeps its spread over many SMs; the grouping's launch and its counting pass go.
constexpr int kRgRows = 8;
constexpr int kRgMaxTopK = 16;
constexpr int64_t kRgMaxBlocks = 128;
constexpr int64_t kRgMaxPrefixWords = 8192;  // the last block's per-block prefixes in shared memory (32 KB)

__host__ __device__ constexpr int64_t rg_smem_words(int64_t blocks, int64_t n_exp) {
  return kRgRows * n_exp > (blocks + 1) * n_exp ? kRgRows * n_exp : (blocks + 1) * n_exp;
}

__global__ void __launch_bounds__(kRgRows * 32) route_group_kernel(const bf16* scores, int64_t rows, int n_exp,
                                                                   int top_k, const bf16* pes, int32_t* idx,
                                                                   float* weight, int32_t* blk, int32_t* code,
                                                                   unsigned* ticket, int32_t* counts,
                                                                   int32_t* offsets, int32_t* perm, int32_t* inv) {
  cuda::pdl_enter();
  extern __shared__ float rg_smem[];  // rg_smem_words: the softmax scratch, counts, then the last block's prefixes
  __shared__ int32_t s_idx[kRgRows * kRgMaxTopK];
  __shared__ bool s_last;
  const int warp = threadIdx.x >> 5;
  const int64_t r0 = blockIdx.x * static_cast<int64_t>(kRgRows), r = r0 + warp;
  if (r < rows)
    route_row(scores + r * n_exp, n_exp, top_k, pes, rg_smem + warp * n_exp, s_idx + warp * top_k,
              weight + r * top_k);
  __syncthreads();
  int32_t* cnt = reinterpret_cast<int32_t*>(rg_smem);
  for (int e = threadIdx.x; e < n_exp; e += blockDim.x) cnt[e] = 0;
  __syncthreads();
  const int64_t p0 = r0 * top_k;
  const int bp = static_cast<int>(rows - r0 < kRgRows ? rows - r0 : kRgRows) * top_k;
  for (int j = threadIdx.x; j < bp; j += blockDim.x) {
    const int e = s_idx[j];
    int before = 0;
    for (int i = 0; i < j; ++i) before += s_idx[i] == e;
    idx[p0 + j] = e;
    code[p0 + j] = e | before << 16;  // the expert and the pair's rank among the block's pairs of it
    atomicAdd(&cnt[e], 1);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < n_exp; e += blockDim.x) blk[blockIdx.x * static_cast<int64_t>(n_exp) + e] = cnt[e];
  __threadfence();  // this block's idx, weight, codes and counts before its ticket
  __syncthreads();
  if (threadIdx.x == 0) s_last = atomicAdd(ticket, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  // The last block. The other blocks' writes are read from L2 (__ldcg), each thread's loads issued together: the
  // counts into shared memory, where per expert they become exclusive prefixes over the blocks and tot the total;
  // the experts' scan; every pair placed from its code.
  const int nb = static_cast<int>(gridDim.x);
  int32_t *pre = reinterpret_cast<int32_t*>(rg_smem), *tot = pre + nb * n_exp;
  constexpr int kU = 8;
  for (int base = 0; base < nb * n_exp; base += kU * blockDim.x) {
    int32_t v[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int i = base + u * blockDim.x + threadIdx.x;
      v[u] = i < nb * n_exp ? __ldcg(blk + i) : 0;
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int i = base + u * blockDim.x + threadIdx.x;
      if (i < nb * n_exp) pre[i] = v[u];
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < n_exp; e += blockDim.x) {
    int32_t total = 0;
    for (int b = 0; b < nb; ++b) {
      const int32_t c = pre[b * n_exp + e];
      pre[b * n_exp + e] = total;
      total += c;
    }
    tot[e] = total;
  }
  __syncthreads();
  group_scan_experts(tot, n_exp, counts, offsets);
  const int pairs = static_cast<int>(rows) * top_k, block_pairs = kRgRows * top_k;
  for (int base = 0; base < pairs; base += kU * blockDim.x) {
    int32_t v[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int p = base + u * blockDim.x + threadIdx.x;
      v[u] = p < pairs ? __ldcg(code + p) : 0;
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int p = base + u * blockDim.x + threadIdx.x;
      if (p >= pairs) continue;
      const int e = v[u] & 0xffff;
      const int32_t pos = tot[e] + pre[p / block_pairs * n_exp + e] + (v[u] >> 16);
      perm[pos] = p;
      inv[p] = pos;
    }
  }
  if (threadIdx.x == 0) *ticket = 0u;
}

}  // namespace

Status moe_route_cuda(const void* scores, int64_t rows, int64_t n_exp, int top_k, const void* per_expert_scale,
                      int32_t* idx, float* weight, cudaStream_t s) {
  if (rows == 0) return Status::ok();
  if (top_k < 1 || top_k > n_exp || n_exp > 1024) return Status::error("moe_route_cuda: bad expert counts");
  constexpr int kWarpsPerBlock = 4;
  const size_t smem = static_cast<size_t>(kWarpsPerBlock * n_exp) * sizeof(float);
  cuda::launch(route_kernel, cuda::blocks_for(rows, kWarpsPerBlock), kWarpsPerBlock * 32, smem, s,
               static_cast<const bf16*>(scores), rows, n_exp, top_k, static_cast<const bf16*>(per_expert_scale), idx,
               weight);
  return cuda_status(cudaGetLastError(), "moe_route_cuda");
}

Status moe_group_cuda(const int32_t* idx, int64_t pairs, int64_t n_exp, int32_t* counts, int32_t* offsets,
                      int32_t* perm, int32_t* inv, cudaStream_t s, bool blocks) {
  if (pairs > INT32_MAX) return Status::error("moe_group_cuda: more than 2^31 routed pairs");
  if (n_exp <= kGroupMaxExperts) {
    const size_t smem = static_cast<size_t>(group_smem_words(n_exp)) * sizeof(int32_t);
    if (!blocks || pairs <= kGroupOneBlock) {
      cuda::launch(group_block_kernel, 1, kGroupWarps * 32, smem, s, idx, pairs, static_cast<int>(n_exp), counts,
                   offsets, perm, inv);
      return cuda_status(cudaGetLastError(), "moe_group_cuda");
    }
    const int64_t n_blocks = (pairs + kGroupBlockPairs - 1) / kGroupBlockPairs;
    int32_t* blk = nullptr;  // [n_blocks][n_exp]: counts, then each block's first position per expert
    const cudaError_t e = cudaMallocAsync(&blk, sizeof(int32_t) * static_cast<size_t>(n_blocks * n_exp), s);
    if (e != cudaSuccess) return cuda_status(e, "moe_group_cuda (block scratch)");
    const int n = static_cast<int>(n_exp);
    cuda::launch(group_blocks_count_kernel, static_cast<unsigned>(n_blocks), kGroupWarps * 32, smem, s, idx, pairs,
                 n, blk);
    cuda::launch(group_blocks_scan_kernel, 1, kGroupWarps * 32, static_cast<size_t>(n_exp) * sizeof(int32_t), s,
                 static_cast<int>(n_blocks), n, blk, counts, offsets);
    cuda::launch(group_blocks_place_kernel, static_cast<unsigned>(n_blocks), kGroupWarps * 32, smem, s, idx, pairs,
                 n, static_cast<const int32_t*>(blk), perm, inv);
    cudaFreeAsync(blk, s);
    return cuda_status(cudaGetLastError(), "moe_group_cuda");
  }
  constexpr int kWarpsPerBlock = 8;
  const unsigned grid = cuda::blocks_for(n_exp, kWarpsPerBlock);
  cuda::launch(group_count_kernel, grid, kWarpsPerBlock * 32, 0, s, idx, pairs, n_exp, counts);
  cuda::launch(group_place_kernel, grid, kWarpsPerBlock * 32, 0, s, idx, pairs, n_exp, counts, offsets, perm, inv);
  return cuda_status(cudaGetLastError(), "moe_group_cuda");
}

bool moe_route_group_takes(int64_t rows, int64_t n_exp, int top_k) {
  const int64_t blocks = (rows + kRgRows - 1) / kRgRows;
  return rows > 0 && top_k >= 1 && top_k <= kRgMaxTopK && top_k <= n_exp && n_exp <= kGroupMaxExperts &&
         blocks <= kRgMaxBlocks && blocks * n_exp <= kRgMaxPrefixWords;
}

int64_t moe_route_group_scratch(int64_t rows, int64_t n_exp, int top_k) {
  return (rows + kRgRows - 1) / kRgRows * n_exp + rows * top_k;
}

Status moe_route_group_cuda(const void* scores, int64_t rows, int64_t n_exp, int top_k, const void* per_expert_scale,
                            int32_t* idx, float* weight, int32_t* counts, int32_t* offsets, int32_t* perm,
                            int32_t* inv, int32_t* scratch, unsigned* ticket, cudaStream_t s) {
  if (!moe_route_group_takes(rows, n_exp, top_k))
    return Status::error("moe_route_group_cuda: takes 1-1,024 rows, up to 256 experts, a top-k of 1-16 and at most "
                         "8,192 rows x experts / 8 (512 rows of 128 experts) "
                         "(moe_route_cuda then moe_group_cuda take the rest)");
  const int64_t blocks = (rows + kRgRows - 1) / kRgRows;
  const size_t smem = static_cast<size_t>(rg_smem_words(blocks, n_exp)) * sizeof(float);
  cuda::launch(route_group_kernel, static_cast<unsigned>(blocks), kRgRows * 32, smem, s,
               static_cast<const bf16*>(scores), rows, static_cast<int>(n_exp), top_k,
               static_cast<const bf16*>(per_expert_scale), idx, weight, scratch, scratch + blocks * n_exp, ticket,
               counts, offsets, perm, inv);
  return cuda_status(cudaGetLastError(), "moe_route_group_cuda");
}

}  // namespace dg
