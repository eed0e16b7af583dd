// The wgmma flash block for head dim 512 (sm_90a; the full layers' heads), and which wgmma block a head dim takes:
// a block is 64 query rows of one head in two warpgroups, warpgroup w owning output columns [256 w, +256) (a 64 x 512
// f32 accumulator would not fit one warpgroup's registers). The score product is split over the head dims:
// warpgroup w computes Q[:, 256 w ..] K[:, 256 w ..]^T (flash_wgmma.cuh's wg_scores) and the two partial 64 x 64
// tiles are added through shared memory, so both warpgroups hold the same scores, maxima and sums (as
// flash_pair.cuh's warp pairs); then each runs O += P V[:, its columns] (wg_pv). Same FlashArgs contract as
// flash_block.cuh. Keys come in tiles of 64, one K and one V buffer (64 KB each beside the 64 KB Q tile), their
// copies staggered: V's flies during the score product and the softmax, the next tile's K during the softmax and P V.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/attention/flash_wgmma.cuh"

namespace dg::flash {

constexpr int kWg5D = 512;                   // the head dim this block takes
constexpr uint32_t kWg5Tile = 8 * kWgPanel;  // 64 rows x 512 halves: 64 KB
// A partial 64 x 64 f32 score tile per warpgroup.
constexpr uint32_t kWg5Exchange = 2 * kWgRows * kWgKeys * sizeof(float);
// Q, K, V, the exchange tiles, and room to align them to the swizzle's 1024-byte period.
constexpr size_t kWg5Smem = 3 * static_cast<size_t>(kWg5Tile) + kWg5Exchange + 1024;
static_assert(kWg5Smem <= 227 * 1024, "within a Hopper block's opt-in shared memory");

// The head dims that have a wgmma block.
__host__ __device__ constexpr bool wg_head_dim(int64_t head_dim) { return head_dim == kWgD || head_dim == kWg5D; }

// The query rows and heads of one wgmma block: head dim 256 as wg_pair says (pair: whether its two warpgroups take
// two heads), head dim 512 always 64 rows of one head.
struct WgShape {
  int rows, heads;
  bool pair;
};
__host__ __device__ constexpr WgShape wg_shape(int64_t head_dim, int64_t n_heads, int64_t n_kv) {
  if (head_dim == kWg5D) return {kWgRows, 1, false};
  const bool pair = wg_pair(n_heads, n_kv);
  return {wg_block_rows(pair), wg_block_heads(pair), pair};
}

// Dynamic shared memory of the wgmma block for head dim kD.
template <int kD> constexpr size_t wg_smem_bytes() {
  static_assert(wg_head_dim(kD), "head dims 256 and 512");
  return kD == kWg5D ? kWg5Smem : kWgSmem;
}

#if DG_HAS_WGMMA

// One block's work: query rows [64 bx, +64) of head h, key split z.
__device__ __forceinline__ void flash_wgmma512_block(const FlashArgs& a, int64_t bx, int h, int z) {
  const auto [smem, base] = wg_smem();
  const int tid = static_cast<int>(threadIdx.x), wg = tid >> 7, me = tid & 127, warp = me >> 5;
  const int lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int kvh = h / (a.n_heads / a.n_kv);
  const int64_t r0 = bx * kWgRows, r_end = r0 + kWgRows < a.rows ? r0 + kWgRows : a.rows;
  const int64_t qp_min = a.q_pos0 + r0, qp_max = a.q_pos0 + r_end - 1;
  const KeySpan span = key_span<kWgKeys>(a, z, r0, r_end);

  const uint32_t qs = base, ks = base + kWg5Tile, vs = base + 2 * kWg5Tile;
  float4* xs = reinterpret_cast<float4*>(smem + 3 * static_cast<size_t>(kWg5Tile));  // [warpgroup][n8 tile][me]
  if (span.first < span.end) {  // in flight while Q converts
    wg_load_tile<kWg5D>(ks, a.ck, a.kf, a, kvh, span.first);
    cp_async_commit();
  }
  wg_load_q<kWg5D, kWgThreads>(smem, a, r0, h, tid);

  // This warpgroup's half: head dims (of Q and K) and output columns (of V) [256 wg, +256), panels 4 wg .. 4 wg + 3.
  const uint32_t half = static_cast<uint32_t>(wg) * 4 * kWgPanel;
  const uint64_t q_desc = cuda::wgmma_desc_sw128(qs + half), k_desc = cuda::wgmma_desc_sw128(ks + half);
  const int64_t qrow_lo = r0 + warp * 16 + g;
  const int64_t qp_lo = a.q_pos0 + qrow_lo, qp_hi = qp_lo + 8;
  float o[kWgD / 8][4];
#pragma unroll
  for (int n = 0; n < kWgD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  RowStats rs;
  for (int64_t j0 = span.first; j0 < span.end; j0 += kWgKeys) {
    cp_async_wait<0>();                // this tile's K (the only group in flight)
    cuda::fence_proxy_async_shared();  // this thread's cp.async (and Q) writes, visible to wgmma ...
    __syncthreads();  // ... from every thread; both warpgroups are done with the last tile's V and exchange tiles
    wg_load_tile<kWg5D>(vs, a.cv, a.vf, a, kvh, j0);
    cp_async_commit();

    float s[kWgKeys / 8][4];
    wg_scores(s, q_desc, k_desc);
#pragma unroll
    for (int n = 0; n < kWgKeys / 8; ++n) xs[(wg * 8 + n) * 128 + me] = make_float4(s[n][0], s[n][1], s[n][2], s[n][3]);
    __syncthreads();  // both partial tiles written, and both warpgroups are done reading K
    if (j0 + kWgKeys < span.end) wg_load_tile<kWg5D>(ks, a.ck, a.kf, a, kvh, j0 + kWgKeys);
    cp_async_commit();  // (an empty group on the last tile: the wait below counts groups)
    // The other warpgroup's half of the scores, at the same rows and keys (the same thread of its warpgroup).
#pragma unroll
    for (int n = 0; n < kWgKeys / 8; ++n) {
      const float4 p = xs[((wg ^ 1) * 8 + n) * 128 + me];
      s[n][0] += p.x;
      s[n][1] += p.y;
      s[n][2] += p.z;
      s[n][3] += p.w;
    }
    softmax_tile<kWgKeys / 8, kWgD>(s, o, rs, a, j0, span.S,
                                    tile_needs_mask<kWgKeys>(a, j0, span.S, qp_min, qp_max), qp_lo, qp_hi, t);

    cp_async_wait<1>();  // this tile's V (the next K may still fly)
    cuda::fence_proxy_async_shared();
    __syncthreads();
    wg_pv(o, s, vs + half);
  }

  store_rows<kWg5D, kWgD>(a, o, rs, qrow_lo, h, static_cast<int64_t>(wg) * kWgD, z, t);
}

// The wgmma block of head dim kD (256: flash_wgmma.cuh's, two forms by `pair`; 512: the one above).
template <int kD>
__device__ __forceinline__ void flash_wgmma_run(const FlashArgs& a, int64_t bx, int by, int z, bool pair) {
  static_assert(wg_head_dim(kD), "head dims 256 and 512");
  if constexpr (kD == kWg5D) flash_wgmma512_block(a, bx, by, z);
  else flash_wgmma_block(a, bx, by, z, pair);
}

#endif  // DG_HAS_WGMMA

}  // namespace dg::flash
