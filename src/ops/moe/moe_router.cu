// The MoE router's product, routing and grouping in one launch (moe_cuda.h: moe_router_route_cuda): CTAs of
// kRtWarps warps each take a tile of kRtRows rows and a slice of kRtExperts experts and sum r W^T over the hidden
// size with bf16 mma.sync (f32 sums, the warps splitting the hidden size, their partials added in warp order, the
// scores rounded to bf16 as the cuBLAS product wrote them); the last slice of a row tile to finish (a ticket per tile)
// routes the tile's rows from the scores (route_row) and writes its pairs' codes and counts; the last tile to finish
// (a ticket for the launch) groups every pair (group_last_block). It replaces the router's cuBLAS product (a split-K
// pair of launches at one canvas) and the routing-and-grouping launch.
// Reference: DiffusionGemmaTextRouter; moe_route_cpu (linear_cpu, the scores rounded to the activation storage).
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "core/cuda/mma.cuh"
#include "ops/moe/moe_cuda.h"
#include "ops/moe/moe_route.cuh"

namespace dg {
namespace {

using cuda::bf16;
using namespace moe_route;

constexpr int kRtRows = 16;     // a tile's rows: the mma's M
constexpr int kRtExperts = 16;  // a CTA's experts: two n8 tiles
constexpr int kRtWarps = 8;     // the hidden size split over the warps in chunks of 32
constexpr int64_t kRtMaxTiles = kRouterTickets - 1;

struct RouterArgs {
  const bf16* r;  // [rows, hidden]
  const bf16* w;  // [n_exp, hidden]
  int64_t rows;
  int hidden, n_exp, top_k;
  const bf16* pes;
  bf16* scores;  // [rows, n_exp]
  int32_t *idx, *blk, *code;
  float* weight;
  unsigned* tickets;  // [0]: the launch's; [1 + tile]: each row tile's
  int32_t *counts, *offsets, *perm, *inv;
};

__host__ __device__ constexpr int64_t rt_smem_words(int64_t tiles, int64_t n_exp) {
  // the tile's scores (bf16, half a word each) and the warps' softmax scratch, or the last block's prefixes
  return kRtRows * n_exp / 2 + kRtWarps * n_exp > (tiles + 1) * n_exp ? kRtRows * n_exp / 2 + kRtWarps * n_exp
                                                                       : (tiles + 1) * n_exp;
}

// The products: a thread's 16-byte loads cover k 8t..8t+7 of each 32-wide chunk of its row g (and g + 8) of r and of
// expert rows g and 8 + g of the slice. Two m16n8k16 steps use them: the fragments' k pairs (2t, 2t + 1) and
// (2t + 8, 2t + 9) stand for k 8t + {0,1} and 8t + {2,3} in the first, 8t + {4,5} and 8t + {6,7} in the second; A and
// B read the same order, so every product of the chunk is summed once.
__device__ __forceinline__ void slice_products(const RouterArgs& a, int64_t r0, int e0, float (&acc)[2][4]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t ra = r0 + g, rb = r0 + g + 8;
  const bf16* pa = a.r + ra * a.hidden + 8 * t;
  const bf16* pb = a.r + rb * a.hidden + 8 * t;
  const bf16* w0 = a.w + static_cast<int64_t>(e0 + g) * a.hidden + 8 * t;
  const bf16* w1 = a.w + static_cast<int64_t>(e0 + 8 + g) * a.hidden + 8 * t;
  const bool has_a = ra < a.rows, has_b = rb < a.rows;
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll 4
  for (int k = 32 * warp; k < a.hidden; k += 32 * kRtWarps) {
    const uint4 x0 = has_a ? __ldg(reinterpret_cast<const uint4*>(pa + k)) : zero;
    const uint4 x1 = has_b ? __ldg(reinterpret_cast<const uint4*>(pb + k)) : zero;
    const uint4 y0 = __ldg(reinterpret_cast<const uint4*>(w0 + k));
    const uint4 y1 = __ldg(reinterpret_cast<const uint4*>(w1 + k));
    const uint32_t lo[4] = {x0.x, x1.x, x0.y, x1.y}, hi[4] = {x0.z, x1.z, x0.w, x1.w};
    cuda::mma_bf16_16816(acc[0], lo, y0.x, y0.y);
    cuda::mma_bf16_16816(acc[1], lo, y1.x, y1.y);
    cuda::mma_bf16_16816(acc[0], hi, y0.z, y0.w);
    cuda::mma_bf16_16816(acc[1], hi, y1.z, y1.w);
  }
}

__global__ void __launch_bounds__(kRtWarps * 32) router_route_group_kernel(RouterArgs a) {
  cuda::pdl_enter();
  __shared__ float part[kRtWarps][kRtRows * kRtExperts];
  __shared__ int32_t s_idx[kRtRows * kUnitMaxTopK];
  __shared__ bool s_last;
  extern __shared__ float rt_smem[];  // rt_smem_words
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int tile = static_cast<int>(blockIdx.x), e0 = static_cast<int>(blockIdx.y) * kRtExperts;
  const int64_t r0 = static_cast<int64_t>(tile) * kRtRows;
  float acc[2][4] = {};
  slice_products(a, r0, e0, acc);
#pragma unroll
  for (int j = 0; j < 2; ++j) {  // C fragment: rows g and g + 8, columns 8 j + 2 t and + 1
    part[warp][g * kRtExperts + 8 * j + 2 * t] = acc[j][0];
    part[warp][g * kRtExperts + 8 * j + 2 * t + 1] = acc[j][1];
    part[warp][(g + 8) * kRtExperts + 8 * j + 2 * t] = acc[j][2];
    part[warp][(g + 8) * kRtExperts + 8 * j + 2 * t + 1] = acc[j][3];
  }
  __syncthreads();
  const int tile_rows = static_cast<int>(a.rows - r0 < kRtRows ? a.rows - r0 : kRtRows);
  for (int i = threadIdx.x; i < kRtRows * kRtExperts; i += blockDim.x) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kRtWarps; ++w) sum += part[w][i];
    const int row = i / kRtExperts;
    if (row < tile_rows) a.scores[(r0 + row) * a.n_exp + e0 + i % kRtExperts] = __float2bfloat16_rn(sum);
  }
  if (!last_arrival(a.tickets + 1 + tile, gridDim.y, &s_last)) return;
  // The tile's last slice: its rows' scores (other CTAs' writes, from L2) into shared memory, then a warp a row.
  auto* sc = reinterpret_cast<bf16*>(rt_smem);
  float* scratch = rt_smem + kRtRows * a.n_exp / 2;
  const int words = tile_rows * a.n_exp / 2;  // n_exp is even: bf16 pairs
  const auto* src = reinterpret_cast<const unsigned*>(a.scores + r0 * a.n_exp);
  for (int i = threadIdx.x; i < words; i += blockDim.x) reinterpret_cast<unsigned*>(sc)[i] = __ldcg(src + i);
  __syncthreads();
  for (int row = warp; row < tile_rows; row += kRtWarps)
    route_row(sc + row * a.n_exp, a.n_exp, a.top_k, a.pes, scratch + warp * a.n_exp, s_idx + row * a.top_k,
              a.weight + (r0 + row) * a.top_k);
  __syncthreads();
  if (threadIdx.x == 0) a.tickets[1 + tile] = 0u;
  unit_codes(s_idx, tile_rows * a.top_k, r0 * a.top_k, a.n_exp, reinterpret_cast<int32_t*>(scratch), a.idx, a.code,
             a.blk + static_cast<int64_t>(tile) * a.n_exp);
  if (!last_arrival(a.tickets, gridDim.x, &s_last)) return;
  group_last_block(a.blk, a.code, static_cast<int>(gridDim.x), a.n_exp, static_cast<int>(a.rows) * a.top_k,
                   kRtRows * a.top_k, reinterpret_cast<int32_t*>(rt_smem), a.counts, a.offsets, a.perm, a.inv);
  if (threadIdx.x == 0) a.tickets[0] = 0u;
}

}  // namespace

bool moe_router_route_takes(int64_t rows, int64_t hidden, int64_t n_exp, int top_k) {
  const int64_t tiles = (rows + kRtRows - 1) / kRtRows;
  return rows > 0 && hidden > 0 && hidden % 32 == 0 && n_exp % kRtExperts == 0 && n_exp <= kGroupMaxExperts &&
         top_k >= 1 && top_k <= kUnitMaxTopK && top_k <= n_exp && tiles <= kRtMaxTiles &&
         tiles * n_exp <= kUnitMaxPrefixWords;
}

int64_t moe_router_route_scratch(int64_t rows, int64_t n_exp, int top_k) {
  return (rows + kRtRows - 1) / kRtRows * n_exp + rows * top_k;
}

Status moe_router_route_cuda(const void* r, const void* w, int64_t rows, int64_t hidden, int64_t n_exp, int top_k,
                             const void* per_expert_scale, void* scores, int32_t* idx, float* weight, int32_t* counts,
                             int32_t* offsets, int32_t* perm, int32_t* inv, int32_t* scratch, unsigned* tickets,
                             cudaStream_t s) {
  if (!moe_router_route_takes(rows, hidden, n_exp, top_k))
    return Status::error("moe_router_route_cuda: takes 1-1,024 rows, a hidden size a multiple of 32, 16-256 experts "
                         "(a multiple of 16), a top-k of 1-16 and at most 8,192 rows x experts / 16 (the router's "
                         "cuBLAS product and moe_route_group_cuda take the rest)");
  if (((reinterpret_cast<uintptr_t>(r) | reinterpret_cast<uintptr_t>(w)) & 15) != 0)
    return Status::error("moe_router_route_cuda: r and W must be 16-byte aligned");
  const int64_t tiles = (rows + kRtRows - 1) / kRtRows;
  RouterArgs a{static_cast<const bf16*>(r),
               static_cast<const bf16*>(w),
               rows,
               static_cast<int>(hidden),
               static_cast<int>(n_exp),
               top_k,
               static_cast<const bf16*>(per_expert_scale),
               static_cast<bf16*>(scores),
               idx,
               scratch,
               scratch + tiles * n_exp,
               weight,
               tickets,
               counts,
               offsets,
               perm,
               inv};
  const size_t smem = static_cast<size_t>(rt_smem_words(tiles, n_exp)) * sizeof(float);
  cuda::launch(router_route_group_kernel, dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(n_exp / kRtExperts)),
               kRtWarps * 32, smem, s, a);
  return cuda_status(cudaGetLastError(), "moe_router_route_cuda");
}

}  // namespace dg
