// The wgmma flash block for head dim 256 (sm_90a; attention_flash.cu and attention_flash_segments.cu launch it when
// the caller asks for it: `bench --attention-wgmma`): two warpgroups of 64 query rows each share every K/V tile in
// shared memory. S = Q K^T by wgmma m64n64k16 with both operands in shared memory, the online softmax of
// flash_block.cuh on the accumulators (they are laid out as mma.sync's), then O += P V by wgmma m64n256k16 with P
// from registers and V read MN-major (transposed by the tensor cores, no ldmatrix). Same FlashArgs contract as
// flash_block: ring-cache slots, cached then fresh keys, causal/window masks, tile skipping, key splits.
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

// Byte offset of 16-byte chunk `chunk` (0..31) of row `row` in a [64, 256] f16 tile: four 64-column panels of
// 128-byte rows, chunk c of row r at c ^ (r % 8) within its panel row (the 128-byte swizzle). Q, K and V tiles share
// it: Q and K are read K-major (rows = query rows / keys, k = head dims), V MN-major (k = keys, n = head dims).
__device__ __forceinline__ uint32_t wg_offset(int row, int chunk) {
  return static_cast<uint32_t>((chunk >> 3) * kWgPanel + row * 128 + (((chunk & 7) ^ (row & 7)) << 4));
}

// Keys [j0, j0 + 64) of KV head kvh (cache ring slots, then fresh rows; zeros past S) into the tile at `dst` by
// cp.async: thread i copies chunk i % 32 of rows i / 32 + 8 k, so its swizzle is the same for all eight rows.
__device__ __forceinline__ void wg_load_tile(uint32_t dst, const f16* cache, const f16* fresh, const FlashArgs& a,
                                             int kvh, int64_t j0) {
  const int ch = static_cast<int>(threadIdx.x) & 31, r0 = static_cast<int>(threadIdx.x) >> 5;
  copy_key_rows<kWgKeys / 8, 8>(dst + wg_offset(r0, ch), 8 * 128, cache + kvh * kWgD + ch * 8,
                                fresh + kvh * kWgD + ch * 8, static_cast<int64_t>(a.n_kv) * kWgD, a, j0 + r0);
}

// A warpgroup's Q tile (rows [r0, r0 + 64) of head h, zeros past the end) converted bf16 -> f16 into `qs` (exact
// for the magnitudes QK-norm produces). `q_smem` is the generic address of the same bytes.
__device__ __forceinline__ void wg_load_q(unsigned char* q_smem, const FlashArgs& a, int64_t r0, int h) {
  const int i = static_cast<int>(threadIdx.x) & 127, ch = i & 31;
  uint4 raw[kWgRows / 4];
#pragma unroll
  for (int k = 0; k < kWgRows / 4; ++k) {
    const int64_t r = r0 + (i >> 5) + 4 * k;
    raw[k] = r < a.rows ? *reinterpret_cast<const uint4*>(a.q + (r * a.n_heads + h) * kWgD + ch * 8)
                        : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int k = 0; k < kWgRows / 4; ++k) {
    const auto* b = reinterpret_cast<const __nv_bfloat162*>(&raw[k]);
    uint4 packed;
    auto* o = reinterpret_cast<uint32_t*>(&packed);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 f = __bfloat1622float2(b[e]);
      o[e] = pack_f16(f.x, f.y);
    }
    *reinterpret_cast<uint4*>(q_smem + wg_offset((i >> 5) + 4 * k, ch)) = packed;
  }
}

// Keeps the compiler from moving accesses of the accumulators across the asynchronous products (as moe_stream.cu).
template <int kN> __device__ __forceinline__ void wg_pin(float (&d)[kN][4]) {
#pragma unroll
  for (int j = 0; j < kN; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) asm volatile("" : "+f"(d[j][q])::"memory");
}

// One block's work: z = key split; the rows and heads of its warpgroups as wg_block_rows / wg_block_heads say.
__device__ __forceinline__ void flash_wgmma_block(const FlashArgs& a, int64_t bx, int by, int z, bool pair) {
  extern __shared__ __align__(16) unsigned char wg_smem_raw[];
  const uint32_t raw_addr = cuda::smem_u32(wg_smem_raw);
  const uint32_t pad = ((raw_addr + 1023u) & ~1023u) - raw_addr;
  unsigned char* smem = wg_smem_raw + pad;
  const uint32_t base = raw_addr + pad;

  const int wg = static_cast<int>(threadIdx.x) >> 7, warp = (static_cast<int>(threadIdx.x) >> 5) & 3;
  const int lane = static_cast<int>(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;
  const int h = pair ? 2 * by + wg : by;
  const int kvh = h / (a.n_heads / a.n_kv);  // the same for both warpgroups
  const int64_t blk_r0 = bx * wg_block_rows(pair), r0 = pair ? blk_r0 : blk_r0 + wg * kWgRows;
  const int64_t blk_end = blk_r0 + wg_block_rows(pair) < a.rows ? blk_r0 + wg_block_rows(pair) : a.rows;

  const int64_t j_begin = static_cast<int64_t>(z) * a.tiles_per_split * kWgKeys;
  const int64_t S_all = a.n_cached + a.n_fresh;
  const int64_t split_end = j_begin + static_cast<int64_t>(a.tiles_per_split) * kWgKeys;
  const int64_t S = a.n_splits > 1 && split_end < S_all ? split_end : S_all;
  // The tiles the block visits (flash_pair.cuh): causal attention skips those the window hides from all of the
  // block's rows and stops after the last key any of them sees.
  const int64_t blk_qp_min = a.q_pos0 + blk_r0, blk_qp_max = a.q_pos0 + blk_end - 1;
  int64_t j_first = j_begin, j_end = S;
  if (a.causal) {
    if (a.window > 0)
      while (j_first < j_end && a.key_pos0 + j_first + kWgKeys - 1 <= blk_qp_min - a.window) j_first += kWgKeys;
    const int64_t last_visible = blk_qp_max - a.key_pos0 + 1;
    if (last_visible < j_end) j_end = last_visible > j_first ? last_visible : j_first;
  }
  // The warpgroup's own rows decide where a tile needs the mask.
  const int64_t wg_end = r0 + kWgRows < a.rows ? r0 + kWgRows : a.rows;
  const int64_t wg_qp_min = a.q_pos0 + r0, wg_qp_max = a.q_pos0 + (wg_end > r0 ? wg_end : r0 + 1) - 1;

  const uint32_t qs = base + static_cast<uint32_t>(wg) * kWgTile, ks = base + 2 * kWgTile, vs = base + 4 * kWgTile;
  auto issue = [&](int64_t j0, int buf) {
    wg_load_tile(ks + buf * kWgTile, a.ck, a.kf, a, kvh, j0);
    wg_load_tile(vs + buf * kWgTile, a.cv, a.vf, a, kvh, j0);
    cp_async_commit();
  };
  if (j_first < j_end) issue(j_first, 0);  // in flight while Q converts
  wg_load_q(smem + static_cast<size_t>(wg) * kWgTile, a, r0, h);

  const int64_t qrow_lo = r0 + warp * 16 + g;
  const int64_t qp_lo = a.q_pos0 + qrow_lo, qp_hi = qp_lo + 8;
  float o[kWgD / 8][4];
#pragma unroll
  for (int n = 0; n < kWgD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  RowStats rs;
  // Descriptors: K-major Q and K (k step ks: panel ks / 4, 32 bytes per step within the row); V MN-major, 64-column
  // panels kWgPanel apart, a k16 step 16 key rows (2048 bytes) on.
  const uint64_t q_desc = cuda::wgmma_desc_sw128(qs);
  int buf = 0;
  for (int64_t j0 = j_first; j0 < j_end; j0 += kWgKeys, buf ^= 1) {
    cp_async_wait<0>();
    cuda::fence_proxy_async_shared();  // this thread's cp.async (and Q) writes, visible to wgmma ...
    __syncthreads();  // ... from every thread; and both warpgroups are done with the other buffer
    if (j0 + kWgKeys < j_end) issue(j0 + kWgKeys, buf ^ 1);

    const int64_t kp_lo = a.key_pos0 + j0, kp_hi = kp_lo + kWgKeys - 1;
    bool need_mask = j0 + kWgKeys > S;
    if (a.causal)
      need_mask = need_mask || kp_hi > wg_qp_min || (a.window > 0 && kp_lo <= wg_qp_max - a.window);

    const uint64_t k_desc = cuda::wgmma_desc_sw128(ks + static_cast<uint32_t>(buf) * kWgTile);
    float s[kWgKeys / 8][4];
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

    softmax_tile<kWgKeys / 8, kWgD>(s, o, rs, a, j0, S, need_mask, qp_lo, qp_hi, t);

    uint32_t p[kWgKeys / 16][4];  // wgmma's A fragments, as mma.sync's (pv_tile)
#pragma unroll
    for (int kk = 0; kk < kWgKeys / 16; ++kk) {
      p[kk][0] = pack_f16(s[2 * kk][0], s[2 * kk][1]);
      p[kk][1] = pack_f16(s[2 * kk][2], s[2 * kk][3]);
      p[kk][2] = pack_f16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      p[kk][3] = pack_f16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }
    const uint32_t v_tile = vs + static_cast<uint32_t>(buf) * kWgTile;
    wg_pin(o);
    cuda::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kWgKeys / 16; ++kk)
      cuda::wgmma_f16_rs_m64n256k16_mn(o, p[kk], cuda::wgmma_desc_sw128_mn(v_tile + kk * 16 * 128, kWgPanel));
    cuda::wgmma_commit();
    cuda::wgmma_wait<0>();
    wg_pin(o);
  }

  store_rows<kWgD, kWgD>(a, o, rs, qrow_lo, h, 0, z, t);
}

#endif  // DG_HAS_WGMMA

}  // namespace dg::flash
