#include "ops/attention/kv_digest.h"

#include <bit>
#include <cstring>

namespace dg {

static_assert(std::endian::native == std::endian::little, "row_digest reads the row's words little-endian");

uint64_t row_digest(const uint8_t* row, int64_t row_bytes) {
  const int64_t words = (row_bytes + 7) / 8;
  uint64_t lane[kDigestLanes];
  for (uint64_t& h : lane) h = kFnvBasis;
  for (int64_t w = 0; w < words; ++w) {
    uint64_t x = 0;
    std::memcpy(&x, row + 8 * w, static_cast<size_t>(w + 1 < words ? 8 : row_bytes - 8 * w));
    uint64_t& h = lane[w % kDigestLanes];
    h = (h ^ x) * kFnvPrime;
  }
  uint64_t d = kFnvBasis;
  for (const uint64_t h : lane) d = (d ^ h) * kFnvPrime;
  return d;
}

}  // namespace dg
