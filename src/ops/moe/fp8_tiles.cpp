// Host twin of the fp8 stage tiles (fp8_tiles.h), for the tests of fp8_to_tiled_layout_cuda and the tiled kernels.
#include "ops/moe/fp8_tiles.h"

#include <cstring>
#include <vector>

#include "core/error.h"

namespace dg {

void fp8_to_tiled_layout(uint8_t* blob, const Shape& s) {
  DG_CHECK(fp8_tiled_ok(s), "fp8_to_tiled_layout: {} rows a matrix and K = {}; tiles need multiples of 128 and 16",
           s.rank >= 2 ? s[s.rank - 2] : 0, s.rank >= 1 ? s[s.rank - 1] : 0);
  const int64_t K = s[s.rank - 1], rows = s.numel() / K;
  const std::vector<uint8_t> rowwise(blob, blob + rows * K);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < K; k += 16)
      std::memcpy(blob + fp8_tiled_offset(r, k, K), rowwise.data() + r * K + k, 16);
}

uint8_t fp8_tiled_code(const uint8_t* blob, const Shape& s, int64_t row, int64_t k) {
  const int64_t K = s[s.rank - 1];
  DG_CHECK(row >= 0 && row < s.numel() / K && k >= 0 && k < K, "fp8_tiled_code: ({}, {}) outside [{}, {}]", row, k,
           s.numel() / K, K);
  return blob[fp8_tiled_offset(row, k, K)];
}

}  // namespace dg
