// The warp-pair flash block (attention_flash.cu and attention_flash_segments.cu launch it for large head dims): 64
// query rows x one query head x all kD output columns in 8 warps, where flash_block.cuh takes 4 warps and recomputes
// the scores once per column slice. Warps w and w + 4 hold the same 16 rows: each computes the scores over its half
// of the head dims, the two partial score tiles are added through shared memory (both warps form the same sum, so
// they keep the same maxima and sums), and each then multiplies by its half of the V columns. Keys arrive in tiles
// of 32, double-buffered: the next tile's K and V copies are in flight while the current one is multiplied.
#pragma once

#include "ops/attention/flash_block.cuh"

namespace dg::flash {

constexpr int kPairThreads = 256;
constexpr int kPairKeys = 32;

// Dynamic shared memory of a pair block: the Q tile, two K and two V tiles at kD + 8 columns, and a partial score
// tile per warp (16 rows x 32 keys in f32).
template <int kD>
constexpr size_t pair_smem_bytes() {
  return sizeof(f16) * (static_cast<size_t>(kRows) + 4 * kPairKeys) * (kD + 8) +
         sizeof(float) * (kPairThreads / 32) * 16 * kPairKeys;
}

// A named barrier over the two warps of a pair (ids 1-4; 0 is __syncthreads).
__device__ __forceinline__ void pair_barrier(int pair) {
  asm volatile("bar.sync %0, 64;\n" ::"r"(pair + 1) : "memory");
}

// One block's work: query rows [r0, r0 + kRows) of head h, key split z.
template <int kD>
__device__ __forceinline__ void flash_pair_block(const FlashArgs& a, int64_t r0, int h, int z) {
  constexpr int kLd = kD + 8, kHalf = kD / 2, kN = kPairKeys / 8;
  static_assert(kHalf % 16 == 0, "a half head is whole mma fragments");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  f16* qs = reinterpret_cast<f16*>(smem_raw);
  f16* ks = qs + kRows * kLd;              // two buffers of kPairKeys rows
  f16* vs = ks + 2 * kPairKeys * kLd;      // two buffers
  float4* xs = reinterpret_cast<float4*>(vs + 2 * kPairKeys * kLd);  // [warp][n][lane]

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = lane & 3;
  const int pair = warp & 3, half = warp >> 2;
  const int kvh = h / (a.n_heads / a.n_kv);
  const int64_t j_begin = static_cast<int64_t>(z) * a.tiles_per_split * kPairKeys;
  const int64_t S_all = a.n_cached + a.n_fresh;
  const int64_t split_end = j_begin + static_cast<int64_t>(a.tiles_per_split) * kPairKeys;
  const int64_t S = a.n_splits > 1 && split_end < S_all ? split_end : S_all;

  // The Q tile, converted through the V buffers (not in use yet).
  static_assert(2 * kPairKeys * kLd >= kRows * kD, "the bf16 Q tile fits in the V buffers");
  load_q_tile<kD, kPairThreads>(qs, reinterpret_cast<bf16*>(vs), a, r0, h);

  const int64_t qrow_lo = r0 + pair * 16 + (lane >> 2);
  const int64_t qp_lo = a.q_pos0 + qrow_lo, qp_hi = qp_lo + 8;
  const int64_t tile_qp_min = a.q_pos0 + r0;
  const int64_t tile_qp_max = a.q_pos0 + (r0 + kRows < a.rows ? r0 + kRows : a.rows) - 1;
  // The tiles the block visits: causal attention skips the ones the window hides before the first and stops after
  // the last key any of its rows sees.
  int64_t j_first = j_begin, j_end = S;
  if (a.causal) {
    if (a.window > 0)
      while (j_first < j_end && a.key_pos0 + j_first + kPairKeys - 1 <= tile_qp_min - a.window) j_first += kPairKeys;
    const int64_t last_visible = tile_qp_max - a.key_pos0 + 1;  // keys j < this may be visible
    if (last_visible < j_end) j_end = last_visible > j_first ? last_visible : j_first;
  }

  float o[kHalf / 8][4];
#pragma unroll
  for (int n = 0; n < kHalf / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  RowStats rs;
  const int mat = lane >> 3, mrow = lane & 7;
  const uint32_t qa = cuda::smem_u32(qs + (pair * 16 + mrow + (mat & 1) * 8) * kLd + half * kHalf + (mat >> 1) * 8);
  const uint32_t kb0 = cuda::smem_u32(ks + ((mat >> 1) * 8 + mrow) * kLd + half * kHalf + (mat & 1) * 8);
  constexpr uint32_t kBufBytes = kPairKeys * kLd * sizeof(f16);

  auto issue = [&](int64_t j0, int buf) {
    load_tile<kD, kPairKeys, kPairThreads>(ks + buf * kPairKeys * kLd, kLd, a.ck, a.kf, a, kvh, kD, j0, 0);
    load_tile<kD, kPairKeys, kPairThreads>(vs + buf * kPairKeys * kLd, kLd, a.cv, a.vf, a, kvh, kD, j0, 0);
    cp_async_commit();
  };
  if (j_first < j_end) issue(j_first, 0);
  int buf = 0;
  for (int64_t j0 = j_first; j0 < j_end; j0 += kPairKeys, buf ^= 1) {
    cp_async_wait<0>();
    __syncthreads();  // this tile has arrived for every thread, and every warp is done with the other buffer
    if (j0 + kPairKeys < j_end) issue(j0 + kPairKeys, buf ^ 1);

    const int64_t kp_lo = a.key_pos0 + j0, kp_hi = kp_lo + kPairKeys - 1;
    bool need_mask = j0 + kPairKeys > S;
    if (a.causal)
      need_mask = need_mask || kp_hi > tile_qp_min || (a.window > 0 && kp_lo <= tile_qp_max - a.window);

    float s[kN][4];
    qk_tile<kHalf, kN>(s, qa, kb0 + buf * kBufBytes, kLd);
    // The pair's two halves of the scores added: each warp publishes its own, then adds its partner's.
#pragma unroll
    for (int n = 0; n < kN; ++n) xs[(warp * kN + n) * 32 + lane] = make_float4(s[n][0], s[n][1], s[n][2], s[n][3]);
    pair_barrier(pair);
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      const float4 p = xs[((warp ^ 4) * kN + n) * 32 + lane];
      s[n][0] += p.x;
      s[n][1] += p.y;
      s[n][2] += p.z;
      s[n][3] += p.w;
    }

    softmax_tile<kN, kHalf>(s, o, rs, a, j0, S, need_mask, qp_lo, qp_hi, t);
    pv_tile<kN, kHalf>(s, o, vs + buf * kPairKeys * kLd + half * kHalf, kLd, lane);
  }

  store_rows<kD, kHalf>(a, o, rs, qrow_lo, h, static_cast<int64_t>(half) * kHalf, z, t);
}

}  // namespace dg::flash
