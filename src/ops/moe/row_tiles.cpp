// Host twin of the expert rows' stage tiles (row_tiles.h), for the tests of to_row_tiles_cuda and the tiled kernels.
#include "ops/moe/row_tiles.h"

#include <cstring>
#include <vector>

#include "core/error.h"

namespace dg {

void to_row_tiles(uint8_t* blob, DType dtype, const Shape& s) {
  DG_CHECK(row_tiles_ok(dtype, s), "to_row_tiles: {} rows a matrix of {} bytes ({}); tiles need fp8 or bf16, rows "
           "a multiple of 128 and bytes of 16", s.rank >= 2 ? s[s.rank - 2] : 0, tile_row_bytes(dtype, s),
           dtype_name(dtype));
  const int64_t rb = tile_row_bytes(dtype, s), rows = s.numel() / s[s.rank - 1];
  const std::vector<uint8_t> rowwise(blob, blob + rows * rb);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t at = 0; at < rb; at += 16)
      std::memcpy(blob + row_tiled_offset(r, at, rb), rowwise.data() + r * rb + at, 16);
}

uint8_t row_tiled_byte(const uint8_t* blob, DType dtype, const Shape& s, int64_t row, int64_t at) {
  const int64_t rb = tile_row_bytes(dtype, s), rows = s.numel() / s[s.rank - 1];
  DG_CHECK(row >= 0 && row < rows && at >= 0 && at < rb, "row_tiled_byte: ({}, {}) outside [{}, {}]", row, at, rows,
           rb);
  return blob[row_tiled_offset(row, at, rb)];
}

}  // namespace dg
