// The MoE router's top-k on the scores and the stable grouping of the routed pairs by expert (moe_cuda.h:
// moe_route_cuda, moe_group_cuda), and both in one launch of many blocks whose last groups (moe_route_group_cuda;
// both in one block measured 4x slower than the two launches at one canvas: docs/NEGATIVE.md).
// Reference: DiffusionGemmaTextRouter (softmax, top-k, renormalisation, per_expert_scale); moe_route_cpu.
#include "core/cuda/capture_arena.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/moe/moe_cuda.h"
#include "ops/moe/moe_route.cuh"

namespace dg {
namespace {

using cuda::bf16;
using namespace moe_route;

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
  column_prefixes(run, kGroupWarps, n_exp, tot);  // per expert: exclusive prefixes over the warps
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
// route_kernel does and write their pairs' codes and counts (unit_codes, a block the unit); the last block to finish
// groups them (group_last_block), the same stable order as group_block_kernel. The routing keeps its spread over many
// SMs; the grouping's launch and its counting pass go.
constexpr int kRgRows = 8;
constexpr int64_t kRgMaxBlocks = 128;

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
  __shared__ int32_t s_idx[kRgRows * kUnitMaxTopK];
  __shared__ bool s_last;
  const int warp = threadIdx.x >> 5;
  const int64_t r0 = blockIdx.x * static_cast<int64_t>(kRgRows), r = r0 + warp;
  if (r < rows)
    route_row(scores + r * n_exp, n_exp, top_k, pes, rg_smem + warp * n_exp, s_idx + warp * top_k,
              weight + r * top_k);
  __syncthreads();
  const int unit_rows = static_cast<int>(rows - r0 < kRgRows ? rows - r0 : kRgRows);
  unit_codes(s_idx, unit_rows * top_k, r0 * top_k, n_exp, reinterpret_cast<int32_t*>(rg_smem), idx, code,
             blk + blockIdx.x * static_cast<int64_t>(n_exp));
  if (!last_arrival(ticket, gridDim.x, &s_last)) return;
  group_last_block(blk, code, static_cast<int>(gridDim.x), n_exp, static_cast<int>(rows) * top_k, kRgRows * top_k,
                   reinterpret_cast<int32_t*>(rg_smem), counts, offsets, perm, inv);
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
    const cudaError_t e = cuda::stream_alloc(reinterpret_cast<void**>(&blk),
                                             sizeof(int32_t) * static_cast<size_t>(n_blocks * n_exp), s);
    if (e != cudaSuccess) return cuda_status(e, "moe_group_cuda (block scratch)");
    const int n = static_cast<int>(n_exp);
    cuda::launch(group_blocks_count_kernel, static_cast<unsigned>(n_blocks), kGroupWarps * 32, smem, s, idx, pairs,
                 n, blk);
    cuda::launch(group_blocks_scan_kernel, 1, kGroupWarps * 32, static_cast<size_t>(n_exp) * sizeof(int32_t), s,
                 static_cast<int>(n_blocks), n, blk, counts, offsets);
    cuda::launch(group_blocks_place_kernel, static_cast<unsigned>(n_blocks), kGroupWarps * 32, smem, s, idx, pairs,
                 n, static_cast<const int32_t*>(blk), perm, inv);
    cuda::stream_free(blk, s);
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
  return rows > 0 && top_k >= 1 && top_k <= kUnitMaxTopK && top_k <= n_exp && n_exp <= kGroupMaxExperts &&
         blocks <= kRgMaxBlocks && blocks * n_exp <= kUnitMaxPrefixWords;
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
