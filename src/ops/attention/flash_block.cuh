// The flash attention kernel's block body (attention_flash.cu launches it once per call, attention_flash_segments.cu
// once for several sequences): 64 query rows (16 per warp) x one query head x one slice of kDv output columns (kDv
// = the head dim up to 128 or 256, the caller's choice: a wider slice holds more accumulators per thread, a narrower
// one recomputes S once per slice); it walks the visible keys in tiles of 64: S = Q K^T for the warp's rows, an
// online softmax in f32 registers, then O += P V with P packed to f16 straight from the score fragments. Nothing
// of size [rows, keys] is ever written. Keys come from the f16 cache (ring slots) then the fresh rows (f16,
// converted by the caller), loaded with cp.async; tiles that the causal/window mask hides entirely are skipped.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/cuda/cuda_common.cuh"
#include "core/cuda/mma.cuh"

namespace dg::flash {

using cuda::bf16;
using cuda::f16;
using cuda::cp_async_commit;
using cuda::cp_async_wait;

constexpr int kRows = 64;  // query rows per block
constexpr int kKeys = 64;  // keys per tile
constexpr int kThreads = 128;

struct FlashArgs {
  const bf16* q;
  const f16* ck;
  const f16* cv;
  const f16* kf;
  const f16* vf;
  bf16* out;
  // slot0: the cache slot of cached key 0 (a ring's first position modulo cap, reduced on the host).
  int64_t cap, slot0, n_cached, n_fresh, rows, q_pos0, key_pos0, window;
  int n_heads, n_kv;
  bool ring, causal;
  // Split keys (flash-decoding): block z / dv_chunks takes key tiles [split * tiles_per_split, ...). With more than
  // one split each block writes its normalised partial output and row (max, sum) in f32 for the combine kernel.
  int n_splits = 1, tiles_per_split = 0;
  float* part_o = nullptr;   // [splits, rows, heads, D]
  float* part_ml = nullptr;  // [splits, rows, heads, 2]
};

__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// One 16-byte chunk column of kPer key rows, j, j + kStep, ... (global key indices) into shared memory at dst0 +
// k * dst_step bytes: cache rows through their ring slots, then fresh rows, zeros past S. cbase and fbase point at
// the chunk in key row 0 of the cache and of the fresh rows; stride is a key row's length in halves. Where all kPer
// rows lie in one run of consecutive rows (all cached without a ring wrap between them, or all fresh: every tile but
// the one at a wrap or at the cached/fresh boundary) the copies are one address and a constant step; otherwise row
// by row, the ring slot advancing by kStep per row. The cached range is at most one ring (checked on the host), so
// slot0 + j needs at most one wrap.
template <int kPer, int kStep>
__device__ __forceinline__ void copy_key_rows(uint32_t dst0, uint32_t dst_step, const f16* cbase, const f16* fbase,
                                              int64_t stride, const FlashArgs& a, int64_t j) {
  constexpr int kSpan = (kPer - 1) * kStep;
  const int64_t S = a.n_cached + a.n_fresh;
  int64_t slot = a.slot0 + j;
  if (a.ring && slot >= a.cap) slot -= a.cap;
  const f16* run = nullptr;
  if (j + kSpan < a.n_cached && (!a.ring || slot + kSpan < a.cap)) run = cbase + slot * stride;
  else if (j >= a.n_cached && j + kSpan < S) run = fbase + (j - a.n_cached) * stride;
  if (run != nullptr) {
    const int64_t step = kStep * stride;
#pragma unroll
    for (int k = 0; k < kPer; ++k) cuda::cp_async16(dst0 + static_cast<uint32_t>(k) * dst_step, run + k * step, true);
    return;
  }
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const void* src = a.q;  // any valid address when zero-filling
    bool valid = false;
    if (j < a.n_cached) {
      src = cbase + slot * stride;
      valid = true;
    } else if (j < S) {
      src = fbase + (j - a.n_cached) * stride;
      valid = true;
    }
    cuda::cp_async16(dst0 + static_cast<uint32_t>(k) * dst_step, src, valid);
    j += kStep;
    slot += kStep;
    if (a.ring)
      while (slot >= a.cap) slot -= a.cap;
  }
}

// Rows of a [kKeys, width] tile (width halves starting at column col0 of each key row) into shared memory with
// row stride `ld`; key j of the tile is global key j0 + j. A thread copies one 16-byte chunk column of every
// kRowStep-th row.
template <int kWidth, int kTileKeys = kKeys, int kTileThreads = kThreads>
__device__ __forceinline__ void load_tile(f16* dst, int ld, const f16* cache, const f16* fresh, const FlashArgs& a,
                                          int kvh, int D, int64_t j0, int col0) {
  constexpr int kChunks = kWidth / 8, kRowStep = kTileThreads / kChunks, kPer = kTileKeys / kRowStep;
  static_assert(kTileThreads % kChunks == 0 && kTileKeys % kRowStep == 0, "whole rows per thread");
  const int ch = static_cast<int>(threadIdx.x) % kChunks, r0 = static_cast<int>(threadIdx.x) / kChunks;
  const int64_t stride = static_cast<int64_t>(a.n_kv) * D;
  copy_key_rows<kPer, kRowStep>(cuda::smem_u32(dst + r0 * ld + ch * 8), static_cast<uint32_t>(kRowStep * ld * 2),
                                cache + kvh * D + col0 + ch * 8, fresh + kvh * D + col0 + ch * 8, stride, a, j0 + r0);
}

// The block's Q tile (rows [r0, r0 + kRows) of head h; rows past the end are zero) as f16 into qs (row stride kD + 8):
// bf16 copied into `scratch` (at least kRows * kD bf16 of shared memory not otherwise in use) with every copy in
// flight at once, then converted (exact for the magnitudes QK-norm produces). Ends with the block synchronised.
template <int kD, int kBlockThreads>
__device__ __forceinline__ void load_q_tile(f16* qs, bf16* scratch, const FlashArgs& a, int64_t r0, int h) {
  constexpr int kLdQ = kD + 8;
  for (int i = threadIdx.x; i < kRows * (kD / 8); i += kBlockThreads) {
    const int row = i / (kD / 8), ch = i % (kD / 8);
    const int64_t r = r0 + row;
    cuda::cp_async16(cuda::smem_u32(scratch + row * kD + ch * 8),
                     a.q + ((r < a.rows ? r : 0) * a.n_heads + h) * kD + ch * 8, r < a.rows);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  for (int i = threadIdx.x; i < kRows * (kD / 8); i += kBlockThreads) {
    const int row = i / (kD / 8), ch = i % (kD / 8);
    const uint4 raw = *reinterpret_cast<const uint4*>(scratch + row * kD + ch * 8);
    const auto* b = reinterpret_cast<const __nv_bfloat162*>(&raw);
    uint4 packed;
    auto* o = reinterpret_cast<uint32_t*>(&packed);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = __bfloat1622float2(b[k]);
      o[k] = pack_f16(f.x, f.y);
    }
    *reinterpret_cast<uint4*>(qs + row * kLdQ + ch * 8) = packed;
  }
  __syncthreads();
}

// S = Q K^T for a warp's 16 rows and kN * 8 keys over kWidth head dims: qa and kb are the lane's ldmatrix addresses
// of the first Q and K fragments (Q's A fragment from rows 0-7 / 8-15 x columns 0-7 / 8-15 of the warp's rows; K's B
// fragments for two groups of 8 keys at once), ld the row stride of both tiles in halves.
template <int kWidth, int kN>
__device__ __forceinline__ void qk_tile(float (&s)[kN][4], uint32_t qa, uint32_t kb, int ld) {
#pragma unroll
  for (int n = 0; n < kN; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll 4
  for (int k0 = 0; k0 < kWidth; k0 += 16) {
    uint32_t af[4];
    cuda::ldmatrix_x4(af, qa + k0 * 2);
#pragma unroll
    for (int n = 0; n < kN; n += 2) {
      uint32_t bf[4];
      cuda::ldmatrix_x4(bf, kb + (n * 8 * ld + k0) * 2);
      cuda::mma_f16_16816(s[n], af, bf[0], bf[1]);
      cuda::mma_f16_16816(s[n + 1], af, bf[2], bf[3]);
    }
  }
}

// O += P V for a warp: P (the kN * 8 keys' probabilities in s) packed to f16 straight from the score fragments, V's
// fragments by ldmatrix.trans from vs (the tile's first key row at the warp's first output column; row stride ld).
template <int kN, int kDv>
__device__ __forceinline__ void pv_tile(const float (&s)[kN][4], float (&o)[kDv / 8][4], const f16* vs, int ld,
                                        int lane) {
  const int mat = lane >> 3;
#pragma unroll
  for (int kk = 0; kk < kN / 2; ++kk) {
    uint32_t pf[4];
    pf[0] = pack_f16(s[2 * kk][0], s[2 * kk][1]);
    pf[1] = pack_f16(s[2 * kk][2], s[2 * kk][3]);
    pf[2] = pack_f16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    pf[3] = pack_f16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    const f16* vrow = vs + (kk * 16 + (lane & 7) + (mat & 1) * 8) * ld + (mat >> 1) * 8;
#pragma unroll
    for (int n = 0; n < kDv / 16; ++n) {
      uint32_t bf[4];
      cuda::ldmatrix_x4_trans(bf, cuda::smem_u32(vrow + n * 16));
      cuda::mma_f16_16816(o[2 * n], pf, bf[0], bf[1]);
      cuda::mma_f16_16816(o[2 * n + 1], pf, bf[2], bf[3]);
    }
  }
}

// The online softmax state of a thread's two rows (g and g + 8 of its warp's 16): running maxima and per-thread
// partial sums (the row totals are reduced once, at the end).
struct RowStats {
  float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.0f, l_hi = 0.0f;
};

// One tile's scores s (the warp's 16 rows x kN * 8 keys from key j0, mma accumulator layout) masked where a key is
// past S or hidden by the causal window, then the online softmax update: s becomes exp(s - new max), the partial
// sums grow, and the kDv / 8 accumulator fragments o are rescaled when a row maximum moved.
template <int kN, int kDv>
__device__ __forceinline__ void softmax_tile(float (&s)[kN][4], float (&o)[kDv / 8][4], RowStats& rs,
                                             const FlashArgs& a, int64_t j0, int64_t S, bool need_mask,
                                             int64_t qp_lo, int64_t qp_hi, int t) {
  constexpr float kLog2e = 1.4426950408889634f;
  float mx_lo = rs.m_lo, mx_hi = rs.m_hi;
#pragma unroll
  for (int n = 0; n < kN; ++n) {
    if (need_mask) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t j = j0 + n * 8 + 2 * t + (e & 1);
        const int64_t qp = e < 2 ? qp_lo : qp_hi;
        const int64_t kp = a.key_pos0 + j;
        bool vis = j < S;
        if (a.causal) vis = vis && kp <= qp && (a.window <= 0 || kp > qp - a.window);
        if (!vis) s[n][e] = -INFINITY;
      }
    }
    mx_lo = fmaxf(mx_lo, fmaxf(s[n][0], s[n][1]));
    mx_hi = fmaxf(mx_hi, fmaxf(s[n][2], s[n][3]));
  }
#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, off));
    mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, off));
  }
  const float base_lo = mx_lo == -INFINITY ? 0.0f : mx_lo * kLog2e;
  const float base_hi = mx_hi == -INFINITY ? 0.0f : mx_hi * kLog2e;
  const float alpha_lo = rs.m_lo == -INFINITY ? 0.0f : exp2f(rs.m_lo * kLog2e - base_lo);
  const float alpha_hi = rs.m_hi == -INFINITY ? 0.0f : exp2f(rs.m_hi * kLog2e - base_hi);
  rs.m_lo = mx_lo;
  rs.m_hi = mx_hi;
  float sum_lo = 0.0f, sum_hi = 0.0f;
#pragma unroll
  for (int n = 0; n < kN; ++n) {
    s[n][0] = exp2f(s[n][0] * kLog2e - base_lo);
    s[n][1] = exp2f(s[n][1] * kLog2e - base_lo);
    s[n][2] = exp2f(s[n][2] * kLog2e - base_hi);
    s[n][3] = exp2f(s[n][3] * kLog2e - base_hi);
    sum_lo += s[n][0] + s[n][1];
    sum_hi += s[n][2] + s[n][3];
  }
  rs.l_lo = rs.l_lo * alpha_lo + sum_lo;
  rs.l_hi = rs.l_hi * alpha_hi + sum_hi;
  // Once the row maxima settle, most tiles leave them unchanged (alpha exactly 1): the warp skips the rescale.
  if (__any_sync(0xffffffffu, alpha_lo != 1.0f || alpha_hi != 1.0f)) {
#pragma unroll
    for (int n = 0; n < kDv / 8; ++n) {
      o[n][0] *= alpha_lo;
      o[n][1] *= alpha_lo;
      o[n][2] *= alpha_hi;
      o[n][3] *= alpha_hi;
    }
  }
}

// A warp's 16 rows x kDv output columns (from column col0 of head h) divided by the row sums: bf16 into out, or with
// split keys the f32 partial and, from the warps holding column 0, each row's (max, sum) for combine_kernel.
template <int kD, int kDv>
__device__ __forceinline__ void store_rows(const FlashArgs& a, const float (&o)[kDv / 8][4], RowStats rs,
                                           int64_t qrow_lo, int h, int64_t col0, int split, int t) {
  const int64_t qrow_hi = qrow_lo + 8;
#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    rs.l_lo += __shfl_xor_sync(0xffffffffu, rs.l_lo, off);
    rs.l_hi += __shfl_xor_sync(0xffffffffu, rs.l_hi, off);
  }
  const float inv_lo = rs.l_lo > 0.0f ? 1.0f / rs.l_lo : 0.0f, inv_hi = rs.l_hi > 0.0f ? 1.0f / rs.l_hi : 0.0f;
  const int64_t ld_out = static_cast<int64_t>(a.n_heads) * kD;
  if (a.n_splits > 1) {
    float* po = a.part_o + static_cast<int64_t>(split) * a.rows * ld_out;
#pragma unroll
    for (int n = 0; n < kDv / 8; ++n) {
      const int64_t c = h * static_cast<int64_t>(kD) + col0 + n * 8 + 2 * t;
      if (qrow_lo < a.rows)
        *reinterpret_cast<float2*>(po + qrow_lo * ld_out + c) = make_float2(o[n][0] * inv_lo, o[n][1] * inv_lo);
      if (qrow_hi < a.rows)
        *reinterpret_cast<float2*>(po + qrow_hi * ld_out + c) = make_float2(o[n][2] * inv_hi, o[n][3] * inv_hi);
    }
    if (t == 0 && col0 == 0) {
      float* ml = a.part_ml + (static_cast<int64_t>(split) * a.rows * a.n_heads) * 2;
      if (qrow_lo < a.rows)
        *reinterpret_cast<float2*>(ml + (qrow_lo * a.n_heads + h) * 2) = make_float2(rs.m_lo, rs.l_lo);
      if (qrow_hi < a.rows)
        *reinterpret_cast<float2*>(ml + (qrow_hi * a.n_heads + h) * 2) = make_float2(rs.m_hi, rs.l_hi);
    }
    return;
  }
#pragma unroll
  for (int n = 0; n < kDv / 8; ++n) {
    const int64_t c = h * static_cast<int64_t>(kD) + col0 + n * 8 + 2 * t;
    if (qrow_lo < a.rows)
      *reinterpret_cast<__nv_bfloat162*>(a.out + qrow_lo * ld_out + c) =
          __floats2bfloat162_rn(o[n][0] * inv_lo, o[n][1] * inv_lo);
    if (qrow_hi < a.rows)
      *reinterpret_cast<__nv_bfloat162*>(a.out + qrow_hi * ld_out + c) =
          __floats2bfloat162_rn(o[n][2] * inv_hi, o[n][3] * inv_hi);
  }
}

// The key tiles (kTileKeys keys each) a block of query rows [r0, r_end) visits in key split z: [first, end) of the
// split's keys [.., S). Causal attention skips the tiles the window hides from all of the block's rows and stops
// after the last key any of them sees.
struct KeySpan {
  int64_t S, first, end;
};
template <int kTileKeys>
__device__ __forceinline__ KeySpan key_span(const FlashArgs& a, int z, int64_t r0, int64_t r_end) {
  const int64_t j_begin = static_cast<int64_t>(z) * a.tiles_per_split * kTileKeys;
  const int64_t S_all = a.n_cached + a.n_fresh;
  const int64_t split_end = j_begin + static_cast<int64_t>(a.tiles_per_split) * kTileKeys;
  KeySpan k;
  k.S = a.n_splits > 1 && split_end < S_all ? split_end : S_all;
  k.first = j_begin;
  k.end = k.S;
  if (a.causal) {
    const int64_t qp_min = a.q_pos0 + r0, qp_max = a.q_pos0 + r_end - 1;
    if (a.window > 0)
      while (k.first < k.end && a.key_pos0 + k.first + kTileKeys - 1 <= qp_min - a.window) k.first += kTileKeys;
    const int64_t last_visible = qp_max - a.key_pos0 + 1;  // keys j < this may be visible
    if (last_visible < k.end) k.end = last_visible > k.first ? last_visible : k.first;
  }
  return k;
}

// Whether the tile of keys [j0, j0 + kTileKeys) needs the per-element mask for queries at positions [qp_min,
// qp_max]: it reaches past S, or (causal) a key lies after the first query or inside the last query's window edge.
template <int kTileKeys>
__device__ __forceinline__ bool tile_needs_mask(const FlashArgs& a, int64_t j0, int64_t S, int64_t qp_min,
                                                int64_t qp_max) {
  const int64_t kp_lo = a.key_pos0 + j0, kp_hi = kp_lo + kTileKeys - 1;
  bool need = j0 + kTileKeys > S;
  if (a.causal) need = need || kp_hi > qp_min || (a.window > 0 && kp_lo <= qp_max - a.window);
  return need;
}

// Dynamic shared memory of a block: the Q tile and a K tile at kD + 8 columns, a V tile at kDv + 8.
template <int kD, int kDv>
constexpr size_t smem_bytes() {
  return sizeof(f16) * (static_cast<size_t>(kRows + kKeys) * (kD + 8) + kKeys * (kDv + 8));
}

// One block's work: query rows [r0, r0 + kRows) of head h, z = split * (kD / kDv) + output column slice.
template <int kD, int kDv>
__device__ __forceinline__ void flash_block(const FlashArgs& a, int64_t r0, int h, int z) {
  constexpr int kLdQ = kD + 8, kLdV = kDv + 8;  // +16 bytes per row: conflict-free fragment reads
  extern __shared__ __align__(16) unsigned char smem_raw[];
  f16* qs = reinterpret_cast<f16*>(smem_raw);
  f16* ks = qs + kRows * kLdQ;
  f16* vs = ks + kKeys * kLdQ;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int kvh = h / (a.n_heads / a.n_kv);
  const int dv_chunks = kD / kDv, split = z / dv_chunks;
  const int64_t col0 = static_cast<int64_t>(z % dv_chunks) * kDv;
  const int64_t j_begin = static_cast<int64_t>(split) * a.tiles_per_split * kKeys;
  const int64_t S_all = a.n_cached + a.n_fresh;
  const int64_t split_end = j_begin + static_cast<int64_t>(a.tiles_per_split) * kKeys;
  const int64_t S = a.n_splits > 1 && split_end < S_all ? split_end : S_all;

  // Q tile: converted through the (still unused) K buffer.
  static_assert(kKeys * (kD + 8) >= kRows * kD, "the bf16 Q tile fits in the K buffer");
  load_q_tile<kD, kThreads>(qs, reinterpret_cast<bf16*>(ks), a, r0, h);

  const int64_t qrow_lo = r0 + warp * 16 + g, qrow_hi = qrow_lo + 8;
  const int64_t qp_lo = a.q_pos0 + qrow_lo, qp_hi = a.q_pos0 + qrow_hi;
  const int64_t tile_qp_min = a.q_pos0 + r0;
  const int64_t tile_qp_max = a.q_pos0 + (r0 + kRows < a.rows ? r0 + kRows : a.rows) - 1;

  float o[kDv / 8][4];
#pragma unroll
  for (int n = 0; n < kDv / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  RowStats rs;
  // Fragments by ldmatrix (lane l addresses row l % 8 of matrix l / 8; qk_tile).
  const int mat = lane >> 3, mrow = lane & 7;
  const uint32_t qa = cuda::smem_u32(qs + (warp * 16 + mrow + (mat & 1) * 8) * kLdQ + (mat >> 1) * 8);
  const uint32_t kb = cuda::smem_u32(ks + ((mat >> 1) * 8 + mrow) * kLdQ + (mat & 1) * 8);

  for (int64_t j0 = j_begin; j0 < S; j0 += kKeys) {
    const int64_t kp_lo = a.key_pos0 + j0, kp_hi = kp_lo + kKeys - 1;
    bool need_mask = j0 + kKeys > S;
    if (a.causal) {
      if (kp_lo > tile_qp_max) break;
      if (a.window > 0 && kp_hi <= tile_qp_min - a.window) continue;
      need_mask = need_mask || kp_hi > tile_qp_min || (a.window > 0 && kp_lo <= tile_qp_max - a.window);
    }
    __syncthreads();  // the previous tile's readers are done (and the Q tile is converted out of the K buffer)
    load_tile<kD>(ks, kLdQ, a.ck, a.kf, a, kvh, kD, j0, 0);
    cp_async_commit();
    load_tile<kDv>(vs, kLdV, a.cv, a.vf, a, kvh, kD, j0, static_cast<int>(col0));
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();

    float s[kKeys / 8][4];
    qk_tile<kD, kKeys / 8>(s, qa, kb, kLdQ);

    softmax_tile<kKeys / 8, kDv>(s, o, rs, a, j0, S, need_mask, qp_lo, qp_hi, t);

    cp_async_wait<0>();
    __syncthreads();
    pv_tile<kKeys / 8, kDv>(s, o, vs, kLdV, lane);
  }

  store_rows<kD, kDv>(a, o, rs, qrow_lo, h, col0, split, t);
}

}  // namespace dg::flash
