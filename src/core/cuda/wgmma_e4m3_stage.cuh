// One pipeline stage of a W8A8 product on Hopper's e4m3 tensor cores (sm_90a), for a warpgroup: 128 rows of A (two
// m64 tiles) times N <= 128 rows of B, both as 128-byte rows (one 128-code K slice each) in shared memory in the
// 128-byte swizzle (wgmma.cuh), added to f32 accumulators acc[t][j][q] (m64 tile t, n8 tile j; wgmma.cuh's fragment
// layout). Used by the warp-specialised expert kernel (src/ops/moe/moe_ws.cu) and the W8A8 product for few rows
// (src/ops/linear/e4m3_rows.cu).
//
// The tensor cores sum each group's four k32 steps with fewer bits than f32 (about 14, as DeepSeek-V3's report
// measured), so every group (m64 tile, n64 half) is summed over the stage alone and then added to the f32
// accumulators: the promotion cuBLASLt also makes. The groups go in order, the next issued before the one before it
// is added (two partial sums in registers), so the tensor cores run through each promotion; the sums and their order
// are those of one group at a time. n64 halves of an n128 pass: with n128 products and their 64 partial sums beside
// the 128 accumulators, ptxas serialised the wgmma pipeline (C7511).
#pragma once

#include <cstdint>

#include "core/cuda/wgmma.cuh"

namespace dg::cuda {

#if DG_HAS_WGMMA

namespace e4m3_stage_detail {

constexpr int kRowBytes = 128;  // a stage's row: 128 codes

// a_d, b_d: the descriptors of A's and B's first rows (wgmma_desc_sw128).
template <int N>
__device__ __forceinline__ void issue_group(uint64_t a_d, uint64_t b_d, int t, int h,
                                            float (&part)[(N > 64 ? 64 : N) / 8][4]) {
  constexpr int kH = N > 64 ? 64 : N;
  fence_acc(part);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    const uint64_t a = wgmma_desc_plus(a_d, t * 64 * kRowBytes + 32 * ks);
    const uint64_t b = wgmma_desc_plus(b_d, h * kH * kRowBytes + 32 * ks);
    if (ks == 0) wgmma_e4m3_m64k32<kH, false>(part, a, b);
    else wgmma_e4m3_m64k32<kH, true>(part, a, b);
  }
  wgmma_commit();
}

}  // namespace e4m3_stage_detail

// acc[t][.][.] += A[64 t .. 64 t + 63] B[0 .. N)^T over one stage: A at shared address a_s (128 rows of 128 bytes,
// 1024-byte aligned), B at b_s (N rows). N is 64 or 128; acc holds J >= N / 8 n8 tiles per m64 tile.
template <int N, int J>
__device__ __forceinline__ void e4m3_stage(uint32_t a_s, uint32_t b_s, float (&acc)[2][J][4]) {
  static_assert(N == 64 || N == 128, "a stage multiplies 64 or 128 rows of B");
  static_assert(J >= N / 8, "the accumulators hold the N columns");
  constexpr int kH = N > 64 ? 64 : N;  // B rows per product: n64 halves of an n128 pass
  constexpr int kHalves = N / kH, kGroups = 2 * kHalves;
  float part[2][kH / 8][4];
  const uint64_t a_d = wgmma_desc_sw128(a_s), b_d = wgmma_desc_sw128(b_s);
  e4m3_stage_detail::issue_group<N>(a_d, b_d, 0, 0, part[0]);
#pragma unroll
  for (int g = 0; g < kGroups; ++g) {
    if (g + 1 < kGroups) {
      e4m3_stage_detail::issue_group<N>(a_d, b_d, (g + 1) / kHalves, (g + 1) % kHalves, part[(g + 1) & 1]);
      wgmma_wait<1>();
    } else {
      wgmma_wait<0>();
    }
    fence_acc(part[g & 1]);
    const int t = g / kHalves, h = g % kHalves;
#pragma unroll
    for (int j = 0; j < kH / 8; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[t][h * kH / 8 + j][q] += part[g & 1][j][q];
  }
}

#endif  // DG_HAS_WGMMA

}  // namespace dg::cuda
