// fp8 expert codes in stage tiles (src/ops/moe/fp8_tiles.h): the offsets place every code once, a stage of 64 rows
// is one run (a last, shorter stage too), and the host twin keeps every code readable where fp8_tiled_code looks.
// The device conversion is checked against this twin byte for byte (tests/ops/moe_stream_checks.cpp, tile_fp8).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "ops/moe/fp8_tiles.h"

namespace dg {
namespace {

TEST(Fp8TiledLayout, EveryCodeLandsOnceAndAStageIsOneRun) {
  for (const Shape s : {Shape{2, 128, 704}, Shape{3, 128, 96}, Shape{1, 256, 2816}}) {
    const int64_t K = s[2], rows = s[0] * s[1];
    std::vector<int> seen(static_cast<size_t>(rows * K), 0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < K; ++k) ++seen[static_cast<size_t>(fp8_tiled_offset(r, k, K))];
    for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "byte " << i << " of K = " << K;
    // Block b's stage st: the 64 rows' codes of the stage, one run from the first row's first code.
    for (int64_t b = 0; b < rows / 64; ++b)
      for (int64_t k0 = 0; k0 < K; k0 += 128) {
        const int64_t len = K - k0 < 128 ? K - k0 : 128, run = fp8_tiled_offset(64 * b, k0, K);
        EXPECT_EQ(run, 64 * b * K + 64 * k0);
        for (int64_t r = 0; r < 64; ++r)
          for (int64_t k = 0; k < len; ++k) ASSERT_EQ(fp8_tiled_offset(64 * b + r, k0 + k, K), run + r * len + k);
      }
  }
  // K 704: the last stage (codes 640 .. 703) of row 64 + 5, block 1: 64 rows x 704 before it, five whole stages.
  EXPECT_EQ(fp8_tiled_offset(64 + 5, 650, 704), 64 * 704 + 5 * 8192 + 5 * 64 + 10);
  EXPECT_TRUE(fp8_tiled_ok(Shape{128, 2816, 704}));
  EXPECT_FALSE(fp8_tiled_ok(Shape{2, 64, 96}));
  EXPECT_FALSE(fp8_tiled_ok(Shape{2, 128, 40}));
}

TEST(Fp8TiledLayout, TheTwinKeepsEveryCode) {
  for (const Shape s : {Shape{2, 128, 704}, Shape{1, 256, 352}}) {
    const int64_t K = s[2], rows = s[0] * s[1];
    std::vector<uint8_t> rowwise(static_cast<size_t>(rows * K) + 64);  // the scale plane's bytes after the codes
    for (size_t i = 0; i < rowwise.size(); ++i) rowwise[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
    std::vector<uint8_t> tiled = rowwise;
    fp8_to_tiled_layout(tiled.data(), s);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < K; ++k)
        ASSERT_EQ(fp8_tiled_code(tiled.data(), s, r, k), rowwise[static_cast<size_t>(r * K + k)]) << r << ", " << k;
    for (size_t i = static_cast<size_t>(rows * K); i < tiled.size(); ++i) EXPECT_EQ(tiled[i], rowwise[i]);
    EXPECT_NE(tiled, rowwise);
  }
  std::vector<uint8_t> small(64 * 96);
  EXPECT_THROW(fp8_to_tiled_layout(small.data(), Shape{1, 64, 96}), Error);
  EXPECT_THROW(fp8_tiled_code(small.data(), Shape{1, 128, 96}, 128, 0), Error);
}

}  // namespace
}  // namespace dg
