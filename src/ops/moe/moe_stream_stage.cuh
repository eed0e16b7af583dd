// One pipeline stage of the streaming grouped GEMM (moe_stream.cu): where a stage's activation rows sit in shared
// memory after the weight tile, and the products of the stage's weight tile with the pass's routed rows, as mma.sync
// (bf16 m16n8k16, or e4m3 m16n8k32 with fp8 activations) or, for the Hopper formats, wgmma.
// Design and parameters: docs/CUDA.md ("The streaming MoE kernel").
#pragma once

#include <cstdint>

#include "core/cuda/cuda_common.cuh"
#include "core/cuda/mma.cuh"
#include "core/cuda/wgmma.cuh"
#include "ops/moe/moe_stream_formats.cuh"

namespace dg::moe_stream {

// Bytes of one activation element: 2 (bf16), 1 (E4M3 codes of the kAct8 formats).
template <class Fmt> constexpr int kXElem = Fmt::kAct8 ? 1 : 2;
// Per stage: the weight tile, then the pass's x rows [Fmt::kRowCap][Fmt::kTileK] (swizzled).
template <class Fmt> constexpr int kXRowBytes = Fmt::kTileK * kXElem<Fmt>;
template <class Fmt> constexpr int kStageBytes = Fmt::kStageBytes + Fmt::kRowCap * kXRowBytes<Fmt>;
// The wgmma formats align their stages to 1024 bytes (the swizzle's period) inside the dynamic shared memory.
template <class Fmt> constexpr int kSmemBytes = Fmt::kStages * kStageBytes<Fmt> + (Fmt::kWgmma ? 1024 : 0);

// Byte offset of 16-byte chunk c of pass row i in a stage's activation tile: rows of kXRowBytes cut into 128-byte
// column blocks of Fmt::kRowCap rows each, chunks swizzled within a block by i % 8 (ldmatrix's eight row addresses in
// distinct banks, and the 128-byte swizzle wgmma reads; blocks 1024-byte aligned).
template <class Fmt> __device__ __forceinline__ uint32_t x_chunk(int i, int c) {
  return static_cast<uint32_t>((c >> 3) * Fmt::kRowCap * 128) + swizzle<128>(i, c & 7);
}

// The products of one load_a's fragments (k from kk0) with the pass's n_pairs pairs of n8 row tiles: bf16
// m16n8k16, or e4m3 m16n8k32 for kAct8 (a 16-byte chunk is 8 bf16 or 16 codes; ldmatrix reads either).
template <class Fmt>
__device__ __forceinline__ void fragment_mma(uint32_t xs, int kk0, int lane, int n_pairs,
                                             const uint32_t (&af)[2][Fmt::kFrags][4],
                                             float (&acc)[2][Fmt::kRowCap / 8][4]) {
  constexpr int kStepK = Fmt::kAct8 ? 32 : 16, kChunkElems = 16 / kXElem<Fmt>;
  static_assert(Fmt::kLoadK == Fmt::kFrags * kStepK, "a load_a covers its fragments' k steps");
  const int mi = lane >> 3;  // which 8x8 matrix of the x4 load this lane addresses
#pragma unroll
  for (int f = 0; f < Fmt::kFrags; ++f) {
    const int kk = kk0 + f * kStepK;
#pragma unroll
    for (int jp = 0; jp < Fmt::kRowCap / 16; ++jp) {
      if (jp >= n_pairs) break;
      uint32_t b[4];  // rows 16jp .. +7 (k lo, k hi), rows 16jp + 8 .. +15 (k lo, k hi)
      cuda::ldmatrix_x4(b, xs + x_chunk<Fmt>(jp * 16 + ((mi >> 1) << 3) + (lane & 7), kk / kChunkElems + (mi & 1)));
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        if constexpr (Fmt::kAct8) {
          cuda::mma_e4m3_16832(acc[t][2 * jp], af[t][f], b[0], b[1]);
          cuda::mma_e4m3_16832(acc[t][2 * jp + 1], af[t][f], b[2], b[3]);
        } else {
          cuda::mma_bf16_16816(acc[t][2 * jp], af[t][f], b[0], b[1]);
          cuda::mma_bf16_16816(acc[t][2 * jp + 1], af[t][f], b[2], b[3]);
        }
      }
    }
  }
}

template <int kT, int kRows, int kCols> __device__ __forceinline__ void zero_acc(float (&acc)[kT][kRows][kCols]) {
#pragma unroll
  for (int t = 0; t < kT; ++t)
#pragma unroll
    for (int j = 0; j < kRows; ++j)
#pragma unroll
      for (int q = 0; q < kCols; ++q) acc[t][j][q] = 0.0f;
}

#if DG_HAS_WGMMA
using cuda::fence_acc;

// The stage as wgmma products of the CTA's warpgroup (Fmt::kWgmma): per k step, the weight rows [0, 64) and
// [64, 128) (the two m64 tiles, whose accumulators are laid out as the two m16 tiles of each warp) times the pass's
// N = 16 n_pairs routed rows. The weight tile's rows are 128 bytes (e4m3: k32 steps; bf16: k16 steps, both 32 bytes)
// read from shared memory; q4 (kPrefetch) converts the stage's A fragments into registers first, as mma.sync takes
// them, and reads only the activations from shared memory.
template <class Fmt, int N>
__device__ __forceinline__ void stage_wgmma(uint32_t ws, const StageSrc& src, int warp, int lane,
                                           float (&acc)[2][Fmt::kRowCap / 8][4]) {
  static_assert(kTileN == 128 && N <= Fmt::kRowCap, "two m64 tiles, n within the pass");
  const uint32_t xs = ws + Fmt::kStageBytes;
  if constexpr (Fmt::kPrefetch) {
    static_assert(Fmt::kLoadK == Fmt::kTileK && !Fmt::kAct8, "one load_a for the whole stage, bf16 fragments");
    uint32_t af[2][Fmt::kFrags][4];
#pragma unroll
    for (int t = 0; t < 2; ++t) Fmt::load_a(ws, src, 16 * (warp + t * kWarps), 0, lane, af[t]);
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int f = 0; f < Fmt::kFrags; ++f)
#pragma unroll
        for (int q = 0; q < 4; ++q) asm volatile("" : "+r"(af[t][f][q])::"memory");
    fence_acc(acc);
    cuda::wgmma_fence();
#pragma unroll
    for (int f = 0; f < Fmt::kFrags; ++f) {
      const uint64_t b = cuda::wgmma_desc_sw128(xs + x_chunk<Fmt>(0, 2 * f));  // k16 step f: chunks 2f, 2f + 1
#pragma unroll
      for (int t = 0; t < 2; ++t) cuda::wgmma_bf16_rs_m64k16<N>(acc[t], af[t][f], b);
    }
  } else {
    static_assert(Fmt::kTileK * kXElem<Fmt> == 128, "128-byte weight and activation rows");
    if constexpr (Fmt::kAct8) {
      // e4m3: each m64 tile's stage (128 k) summed by the tensor cores alone, then added to the f32 accumulators.
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        float part[Fmt::kRowCap / 8][4];
        fence_acc(part);
        cuda::wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          const uint64_t a = cuda::wgmma_desc_sw128(ws + t * 64 * 128 + 32 * ks);
          const uint64_t b = cuda::wgmma_desc_sw128(xs + 32 * ks);
          if (ks == 0) cuda::wgmma_e4m3_m64k32<N, false>(part, a, b);
          else cuda::wgmma_e4m3_m64k32<N, true>(part, a, b);
        }
        cuda::wgmma_commit();
        cuda::wgmma_wait<0>();
        fence_acc(part);
#pragma unroll
        for (int j = 0; j < N / 8; ++j)
#pragma unroll
          for (int q = 0; q < 4; ++q) acc[t][j][q] += part[j][q];
      }
      return;
    }
    fence_acc(acc);
    cuda::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      const uint64_t b = cuda::wgmma_desc_sw128(xs + 32 * ks);
#pragma unroll
      for (int t = 0; t < 2; ++t) cuda::wgmma_bf16_m64k16<N>(acc[t], cuda::wgmma_desc_sw128(ws + t * 64 * 128 + 32 * ks), b);
    }
  }
  cuda::wgmma_commit();
  cuda::wgmma_wait<0>();
  fence_acc(acc);
}
#endif

// One K step of kTileK for the warp's two m16 tiles. The converted formats (Fmt::kPrefetch) fetch and convert all
// of the stage's A fragments before its first product, so a warp has every shared load and conversion chain of the
// stage in flight at once; the ldmatrix formats load each fragment just before its products (fewer registers).
template <class Fmt>
__device__ __forceinline__ void stage_mma(uint32_t ws, const StageSrc& src, int warp, int lane, int n_pairs,
                                          float (&acc)[2][Fmt::kRowCap / 8][4]) {
#if DG_HAS_WGMMA
  if constexpr (Fmt::kWgmma) {
    if constexpr (Fmt::kRowCap == 32) {
      if (n_pairs == 1) stage_wgmma<Fmt, 16>(ws, src, warp, lane, acc);
      else stage_wgmma<Fmt, 32>(ws, src, warp, lane, acc);
    } else {
      switch (n_pairs) {
        case 1: stage_wgmma<Fmt, 16>(ws, src, warp, lane, acc); break;
        case 2: stage_wgmma<Fmt, 32>(ws, src, warp, lane, acc); break;
        case 3: stage_wgmma<Fmt, 48>(ws, src, warp, lane, acc); break;
        default:
          if constexpr (Fmt::kRowCap == 128) {
            if (n_pairs > 4) {  // pass_rows: 8 pairs
              stage_wgmma<Fmt, 128>(ws, src, warp, lane, acc);
              break;
            }
          }
          stage_wgmma<Fmt, 64>(ws, src, warp, lane, acc);
          break;
      }
    }
    return;
  }
#endif
  const uint32_t xs = ws + Fmt::kStageBytes;
  constexpr int kLoads = Fmt::kTileK / Fmt::kLoadK;
  auto load = [&](int l, uint32_t (&af)[2][Fmt::kFrags][4]) {
#pragma unroll
    for (int t = 0; t < 2; ++t) Fmt::load_a(ws, src, 16 * (warp + t * kWarps), l * Fmt::kLoadK, lane, af[t]);
  };
  if constexpr (Fmt::kPrefetch) {
    uint32_t af[kLoads][2][Fmt::kFrags][4];
#pragma unroll
    for (int l = 0; l < kLoads; ++l) load(l, af[l]);
#pragma unroll
    for (int l = 0; l < kLoads; ++l) fragment_mma<Fmt>(xs, l * Fmt::kLoadK, lane, n_pairs, af[l], acc);
  } else {
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      uint32_t af[2][Fmt::kFrags][4];
      load(l, af);
      fragment_mma<Fmt>(xs, l * Fmt::kLoadK, lane, n_pairs, af, acc);
    }
  }
}

}  // namespace dg::moe_stream
