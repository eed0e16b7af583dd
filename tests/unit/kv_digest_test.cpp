// row_digest (src/ops/attention/kv_digest.h), the piece of every KV fingerprint: its values are pinned (the golden
// files and version-2 op-logs hold fingerprints made of them; the expected values come from an independent Python
// rendering of the definition), and every byte of a row, the last partial word's included, moves it.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "ops/attention/kv_digest.h"

namespace dg::test {
namespace kv_digest_test {

std::vector<uint8_t> bytes(int n, int mul, int add) {
  std::vector<uint8_t> b(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) b[static_cast<size_t>(i)] = static_cast<uint8_t>((i * mul + add) & 255);
  return b;
}

TEST(KvDigest, ValuesArePinned) {
  EXPECT_EQ(row_digest(nullptr, 0), 0x92f8ae29b30f7623ull);
  const std::vector<uint8_t> odd = bytes(100, 1, 0);  // 12 whole words and 4 bytes
  EXPECT_EQ(row_digest(odd.data(), 100), 0xba32240451239159ull);
  const std::vector<uint8_t> row = bytes(4096, 7, 3);  // a 26B-A4B sliding row's size in f16: 16 words a lane
  EXPECT_EQ(row_digest(row.data(), 4096), 0x3798f236179984e3ull);
}

TEST(KvDigest, EveryByteMovesIt) {
  for (const int n : {1, 8, 13, 100, 264}) {
    std::vector<uint8_t> row = bytes(n, 5, 1);
    const uint64_t d = row_digest(row.data(), n);
    for (int i = 0; i < n; ++i) {
      row[static_cast<size_t>(i)] ^= 0x10;
      EXPECT_NE(row_digest(row.data(), n), d) << n << " bytes, byte " << i;
      row[static_cast<size_t>(i)] ^= 0x10;
    }
    EXPECT_EQ(row_digest(row.data(), n), d);
  }
}

}  // namespace kv_digest_test
}  // namespace dg::test
