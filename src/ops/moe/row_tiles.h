// Expert weights of byte rows in stage tiles (WeightLayout::kTiled for fp8 and bf16 weights): at upload an expert
// stack [n_exp, rows, K] of fp8 codes or bf16 weights is regrouped so that block b of 64 rows and stage s (bytes
// 128 s .. 128 s + 127 of each row: 128 codes, or 64 bf16) is one contiguous run, the block's rows' bytes of the
// stage row after row. A row's last stage, where its bytes are not a multiple of 128, holds only its remaining bytes:
// no padding, the same bytes, and fp8's f32 row scales (plane 1) stay as stored. The expert kernels' stages are
// exactly these runs, so a stage reads 8 KB in one run where the rows as stored gave 64 runs of 128 bytes, a row's
// bytes apart (why: docs/EXPERTS.md, "Expert rows in stage tiles"). Needs 128-row multiples a matrix
// (row_tiles_ok): a gated product's up rows start a block, and no block crosses a matrix. The host twin
// (to_row_tiles) and the reader (row_tiled_byte) are for the tests; the CPU backend keeps the rows as stored.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/host_device.h"
#include "core/tensor.h"

namespace dg {

inline constexpr int kRowTileRows = 64;    // rows a block
inline constexpr int kRowTileBytes = 128;  // bytes of a row a stage

// The bytes of a row of an fp8 or bf16 tensor of shape s (its first plane's), 0 for other formats.
inline int64_t tile_row_bytes(DType dtype, const Shape& s) {
  if (s.rank < 1) return 0;
  return dtype == DType::kFp8 ? s[s.rank - 1] : dtype == DType::kBF16 ? 2 * s[s.rank - 1] : 0;
}

// Whether a tensor of `dtype` and shape s can be tiled: fp8 or bf16, rows a matrix a multiple of 128, rows of a
// multiple of 16 bytes.
inline bool row_tiles_ok(DType dtype, const Shape& s) {
  const int64_t rb = tile_row_bytes(dtype, s);
  return s.rank >= 2 && rb > 0 && rb % 16 == 0 && s[s.rank - 2] % 128 == 0;
}

// Where byte `at` of row `row` (rows of row_bytes bytes) lies in the tiled form: the block's first byte, the stages
// before (whole stages of 128 bytes a row), then the row within the stage's run of `len`-byte rows.
DG_HOST_DEVICE constexpr int64_t row_tiled_offset(int64_t row, int64_t at, int64_t row_bytes) {
  const int64_t b0 = at / kRowTileBytes * kRowTileBytes;
  const int64_t len = row_bytes - b0 < kRowTileBytes ? row_bytes - b0 : kRowTileBytes;
  return row / kRowTileRows * kRowTileRows * row_bytes + b0 * kRowTileRows + row % kRowTileRows * len + (at - b0);
}

// Host twin of to_row_tiles_cuda: the rows of an fp8 or bf16 tensor (fp8: the codes plane, the first rows * K bytes
// of packed_layout(kFp8, s)) into their tiled form, in place; an error unless row_tiles_ok(dtype, s).
void to_row_tiles(uint8_t* blob, DType dtype, const Shape& s);
// Byte `at` of row `row` of a tiled blob.
uint8_t row_tiled_byte(const uint8_t* blob, DType dtype, const Shape& s, int64_t row, int64_t at);

}  // namespace dg
