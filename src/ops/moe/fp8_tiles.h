// fp8 expert codes in stage tiles (WeightLayout::kTiled for fp8 weights): at upload the codes plane of an fp8 expert
// stack [n_exp, rows, K] is regrouped so that block b of 64 rows and stage s (codes 128 s .. 128 s + 127 of each
// row) is one contiguous run: the block's rows' codes of the stage, row after row. A row's last stage, where K is
// not a multiple of 128, holds only its K - 128 s codes: no padding, the same bytes, and the f32 row scales (plane
// 1) stay as stored. The expert kernels' stages are exactly these runs, so a stage reads 8 KB in one run of the
// plane where the rows as stored gave 64 runs of 128 bytes, K bytes apart (why: docs/CUDA.md, "fp8 experts in
// stage tiles"). Needs 128-row multiples a matrix (fp8_tiled_ok): the gated product's up rows start a block, and
// no block crosses a matrix. The host twin (fp8_to_tiled_layout) and the reader (fp8_tiled_code) are for the
// tests; the CPU backend keeps the rows as stored.
#pragma once

#include <cstdint>

#include "core/host_device.h"
#include "core/tensor.h"

namespace dg {

inline constexpr int kFp8TileRows = 64;  // rows a block
inline constexpr int kFp8TileK = 128;    // codes a stage

// Whether an fp8 tensor of shape s can be tiled: rows a matrix a multiple of 128, K of 16 (the fp8 packs' rule).
inline bool fp8_tiled_ok(const Shape& s) {
  return s.rank >= 2 && s[s.rank - 2] % 128 == 0 && s[s.rank - 1] % 16 == 0;
}

// Where code (row, k) of a plane of K-code rows lies in its tiled form: the block's first byte, the stages before
// (whole stages of 128 codes a row), then the row within the stage's run of `len`-code rows.
DG_HOST_DEVICE constexpr int64_t fp8_tiled_offset(int64_t row, int64_t k, int64_t K) {
  const int64_t k0 = k / kFp8TileK * kFp8TileK, len = K - k0 < kFp8TileK ? K - k0 : kFp8TileK;
  return row / kFp8TileRows * kFp8TileRows * K + k0 * kFp8TileRows + row % kFp8TileRows * len + (k - k0);
}

// Host twin of fp8_to_tiled_layout_cuda: the codes plane of an fp8 tensor (the first rows * K bytes of
// packed_layout(kFp8, s)) into its tiled form, in place; an error unless fp8_tiled_ok(s).
void fp8_to_tiled_layout(uint8_t* blob, const Shape& s);
// Code (row, k) of a tiled fp8 blob.
uint8_t fp8_tiled_code(const uint8_t* blob, const Shape& s, int64_t row, int64_t k);

}  // namespace dg
