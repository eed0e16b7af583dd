// The wgmma flash block for head dim 256 (sm_90a; attention_flash.cu and attention_flash_segments.cu launch it when
// the caller asks for it: `bench --attention-wgmma`): two warpgroups of 64 query rows each share every K/V tile in
// shared memory. S = Q K^T by wgmma m64n64k16 with both operands in shared memory, the online softmax of
// flash_block.cuh on the accumulators (they are laid out as mma.sync's), then O += P V by wgmma m64n256k16 with P
// from registers and V read MN-major (transposed by the tensor cores, no ldmatrix). Same FlashArgs contract as
// flash_block: ring-cache slots, cached then fresh keys, causal/window masks, tile skipping, key splits. Its tile
// layout, loaders and products are shared with the head-dim-512 block (flash_wgmma512.cuh).
#pragma once

#include <cstdint>

#include "core/cuda/wgmma.cuh"
#include "ops/attention/flash_block.cuh"

namespace dg::flash {

constexpr int kWgD = 256;         // the head dim this block takes
constexpr int kWgThreads = 256;   // two warpgroups
constexpr int kWgRows = 64;       // query rows per warpgroup
constexpr int kWgKeys = 64;       // keys per tile
constexpr uint32_t kWgPanel = 64 * 128;     // 64 rows x 64 halves (128-byte rows): one column panel of a tile
constexpr uint32_t kWgTile = 4 * kWgPanel;  // 64 rows x 256 halves: 32 KB
// Q of the two warpgroups, two K and two V buffers, and room to align them to the swizzle's 1024-byte period.
constexpr size_t kWgSmem = 6 * static_cast<size_t>(kWgTile) + 1024;

// Where a block's two warpgroups work. Pair form (n_heads / n_kv even): block (x, y) takes rows [64 x, +64) of the
// query heads 2 y and 2 y + 1, which share one KV head, so each K/V tile feeds twice the products. Single form (an
// odd ratio): rows [128 x, +128) of head y, 64 per warpgroup.
// The pair form where n_heads / n_kv is even, else the single form.
__host__ __device__ constexpr bool wg_pair(int64_t n_heads, int64_t n_kv) { return (n_heads / n_kv) % 2 == 0; }
__host__ __device__ constexpr int wg_block_rows(bool pair) { return pair ? kWgRows : 2 * kWgRows; }
__host__ __device__ constexpr int wg_block_heads(bool pair) { return pair ? 2 : 1; }

#if DG_HAS_WGMMA

// The block's dynamic shared memory from its first 1024-byte boundary (the swizzle's period): the generic pointer
// and the shared-space address of the same byte.
struct WgSmem {
  unsigned char* ptr;
  uint32_t addr;
};
__device__ __forceinline__ WgSmem wg_smem() {
  extern __shared__ __align__(16) unsigned char wg_smem_raw[];
  const uint32_t raw_addr = cuda::smem_u32(wg_smem_raw);
  const uint32_t pad = ((raw_addr + 1023u) & ~1023u) - raw_addr;
  return {wg_smem_raw + pad, raw_addr + pad};
}

// Byte offset of 16-byte chunk `chunk` (0 .. head dim / 8 - 1) of row `row` in a [64, head dim] f16 tile: 64-column
// panels of 128-byte rows, chunk c of row r at c ^ (r % 8) within its panel row (the 128-byte swizzle). Q, K and V
// tiles share it: Q and K are read K-major (rows = query rows / keys, k = head dims), V MN-major (k = keys, n = head
// dims).
__device__ __forceinline__ uint32_t wg_offset(int row, int chunk) {
  return static_cast<uint32_t>((chunk >> 3) * kWgPanel + row * 128 + (((chunk & 7) ^ (row & 7)) << 4));
}

// Keys [j0, j0 + 64) of KV head kvh (kD halves each: cache ring slots, then fresh rows; zeros past S) into the tile
// at `dst` by cp.async, all 256 threads: thread i copies chunks i % 32 + 32 c of rows i / 32 + 8 k, so its swizzle is
// the same for all eight rows.
template <int kD>
__device__ __forceinline__ void wg_load_tile(uint32_t dst, const f16* cache, const f16* fresh, const FlashArgs& a,
                                             int kvh, int64_t j0) {
  static_assert(kWgThreads == 256 && kD % 256 == 0, "8 rows x 32 chunks per pass");
  const int ch = static_cast<int>(threadIdx.x) & 31, r0 = static_cast<int>(threadIdx.x) >> 5;
#pragma unroll
  for (int c = 0; c < kD / 256; ++c)
    copy_key_rows<kWgKeys / 8, 8>(dst + wg_offset(r0, ch + 32 * c), 8 * 128, cache + kvh * kD + (ch + 32 * c) * 8,
                                  fresh + kvh * kD + (ch + 32 * c) * 8, static_cast<int64_t>(a.n_kv) * kD, a,
                                  j0 + r0);
}

// A Q tile (rows [r0, r0 + 64) of head h, kD halves, zeros past the end) converted bf16 -> f16 into `q_smem` (exact
// for the magnitudes QK-norm produces) by kLoaders threads, this one being number i; every global load is in
// flight before the first conversion.
template <int kD, int kLoaders>
__device__ __forceinline__ void wg_load_q(unsigned char* q_smem, const FlashArgs& a, int64_t r0, int h, int i) {
  constexpr int kChunks = kD / 8, kRowStep = kLoaders / kChunks, kPer = kWgRows / kRowStep;
  static_assert(kLoaders % kChunks == 0 && kWgRows % kRowStep == 0, "whole rows per pass");
  const int ch = i % kChunks, row0 = i / kChunks;
  uint4 raw[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int64_t r = r0 + row0 + kRowStep * k;
    raw[k] = r < a.rows ? *reinterpret_cast<const uint4*>(a.q + (r * a.n_heads + h) * kD + ch * 8)
                        : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const auto* b = reinterpret_cast<const __nv_bfloat162*>(&raw[k]);
    uint4 packed;
    auto* o = reinterpret_cast<uint32_t*>(&packed);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 f = __bfloat1622float2(b[e]);
      o[e] = pack_f16(f.x, f.y);
    }
    *reinterpret_cast<uint4*>(q_smem + wg_offset(row0 + kRowStep * k, ch)) = packed;
  }
}

// Keeps the compiler from moving accesses of the accumulators across the asynchronous products (as moe_stream.cu).
template <int kN> __device__ __forceinline__ void wg_pin(float (&d)[kN][4]) {
#pragma unroll
  for (int j = 0; j < kN; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) asm volatile("" : "+f"(d[j][q])::"memory");
}

// S = Q K^T over 256 head dims for a warpgroup's 64 rows and a tile's 64 keys: 16 wgmma m64n64k16, both operands
// K-major from the descriptors of their first panel (k step ks: panel ks / 4, 32 bytes per step within the row).
__device__ __forceinline__ void wg_scores(float (&s)[kWgKeys / 8][4], uint64_t q_desc, uint64_t k_desc) {
#pragma unroll
  for (int n = 0; n < kWgKeys / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
  wg_pin(s);
  cuda::wgmma_fence();
#pragma unroll
  for (int kstep = 0; kstep < kWgD / 16; ++kstep) {
    const uint64_t off = ((kstep >> 2) * kWgPanel + (kstep & 3) * 32) >> 4;
    if (kstep == 0) cuda::wgmma_f16_m64n64k16<false>(s, q_desc + off, k_desc + off);
    else cuda::wgmma_f16_m64n64k16<true>(s, q_desc + off, k_desc + off);
  }
  cuda::wgmma_commit();
  cuda::wgmma_wait<0>();
  wg_pin(s);
}

// O += P V for a warpgroup's 64 rows x 256 output columns: P (the tile's probabilities in s) packed to f16 as wgmma's
// A fragments (mma.sync's, pv_tile), V read MN-major from `v_cols` (the tile's key row 0 at the first column's
// panel): 64-column panels kWgPanel apart, a k16 step 16 key rows (2048 bytes) on.
__device__ __forceinline__ void wg_pv(float (&o)[kWgD / 8][4], const float (&s)[kWgKeys / 8][4], uint32_t v_cols) {
  uint32_t p[kWgKeys / 16][4];
#pragma unroll
  for (int kk = 0; kk < kWgKeys / 16; ++kk) {
    p[kk][0] = pack_f16(s[2 * kk][0], s[2 * kk][1]);
    p[kk][1] = pack_f16(s[2 * kk][2], s[2 * kk][3]);
    p[kk][2] = pack_f16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    p[kk][3] = pack_f16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
  wg_pin(o);
  cuda::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kWgKeys / 16; ++kk)
    cuda::wgmma_f16_rs_m64n256k16_mn(o, p[kk], cuda::wgmma_desc_sw128_mn(v_cols + kk * 16 * 128, kWgPanel));
  cuda::wgmma_commit();
  cuda::wgmma_wait<0>();
  wg_pin(o);
}

// One block's work: z = key split; the rows and heads of its warpgroups as wg_block_rows / wg_block_heads say.
__device__ __forceinline__ void flash_wgmma_block(const FlashArgs& a, int64_t bx, int by, int z, bool pair) {
  const auto [smem, base] = wg_smem();
  const int wg = static_cast<int>(threadIdx.x) >> 7, warp = (static_cast<int>(threadIdx.x) >> 5) & 3;
  const int lane = static_cast<int>(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;
  const int h = pair ? 2 * by + wg : by;
  const int kvh = h / (a.n_heads / a.n_kv);  // the same for both warpgroups
  const int64_t blk_r0 = bx * wg_block_rows(pair), r0 = pair ? blk_r0 : blk_r0 + wg * kWgRows;
  const int64_t blk_end = blk_r0 + wg_block_rows(pair) < a.rows ? blk_r0 + wg_block_rows(pair) : a.rows;
  const KeySpan span = key_span<kWgKeys>(a, z, blk_r0, blk_end);
  // The warpgroup's own rows decide where a tile needs the mask.
  const int64_t wg_end = r0 + kWgRows < a.rows ? r0 + kWgRows : a.rows;
  const int64_t wg_qp_min = a.q_pos0 + r0, wg_qp_max = a.q_pos0 + (wg_end > r0 ? wg_end : r0 + 1) - 1;

  const uint32_t qs = base + static_cast<uint32_t>(wg) * kWgTile, ks = base + 2 * kWgTile, vs = base + 4 * kWgTile;
  auto issue = [&](int64_t j0, int buf) {
    wg_load_tile<kWgD>(ks + buf * kWgTile, a.ck, a.kf, a, kvh, j0);
    wg_load_tile<kWgD>(vs + buf * kWgTile, a.cv, a.vf, a, kvh, j0);
    cp_async_commit();
  };
  if (span.first < span.end) issue(span.first, 0);  // in flight while Q converts
  wg_load_q<kWgD, kWgThreads / 2>(smem + static_cast<size_t>(wg) * kWgTile, a, r0, h,
                                  static_cast<int>(threadIdx.x) & 127);

  const int64_t qrow_lo = r0 + warp * 16 + g;
  const int64_t qp_lo = a.q_pos0 + qrow_lo, qp_hi = qp_lo + 8;
  float o[kWgD / 8][4];
#pragma unroll
  for (int n = 0; n < kWgD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  RowStats rs;
  const uint64_t q_desc = cuda::wgmma_desc_sw128(qs);
  int buf = 0;
  for (int64_t j0 = span.first; j0 < span.end; j0 += kWgKeys, buf ^= 1) {
    cp_async_wait<0>();
    cuda::fence_proxy_async_shared();  // this thread's cp.async (and Q) writes, visible to wgmma ...
    __syncthreads();  // ... from every thread; and both warpgroups are done with the other buffer
    if (j0 + kWgKeys < span.end) issue(j0 + kWgKeys, buf ^ 1);

    float s[kWgKeys / 8][4];
    wg_scores(s, q_desc, cuda::wgmma_desc_sw128(ks + static_cast<uint32_t>(buf) * kWgTile));
    softmax_tile<kWgKeys / 8, kWgD>(s, o, rs, a, j0, span.S,
                                    tile_needs_mask<kWgKeys>(a, j0, span.S, wg_qp_min, wg_qp_max), qp_lo, qp_hi, t);
    wg_pv(o, s, vs + static_cast<uint32_t>(buf) * kWgTile);
  }

  store_rows<kWgD, kWgD>(a, o, rs, qrow_lo, h, 0, z, t);
}

#endif  // DG_HAS_WGMMA

}  // namespace dg::flash
