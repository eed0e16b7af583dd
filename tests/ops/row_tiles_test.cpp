// Expert rows in stage tiles (src/ops/moe/row_tiles.h): the offsets place every byte once, a stage of 64 rows is one
// run (a last, shorter stage too), and the host twin keeps every byte readable where row_tiled_byte looks, for fp8
// codes and bf16 weights. The device conversion is checked against this twin byte for byte (tests/ops/
// moe_stream_checks.cpp, tile_rows).
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "core/error.h"
#include "ops/moe/row_tiles.h"

namespace dg {
namespace {

TEST(RowTiles, EveryByteLandsOnceAndAStageIsOneRun) {
  for (const int64_t rb : {int64_t{704}, int64_t{96}, int64_t{2816}, int64_t{144}}) {
    const int64_t rows = 256;
    std::vector<int> seen(static_cast<size_t>(rows * rb), 0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t at = 0; at < rb; ++at) ++seen[static_cast<size_t>(row_tiled_offset(r, at, rb))];
    for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "byte " << i << " of rows of " << rb;
    // Block b's stage: the 64 rows' bytes of the stage, one run from the first row's first byte.
    for (int64_t b = 0; b < rows / 64; ++b)
      for (int64_t b0 = 0; b0 < rb; b0 += 128) {
        const int64_t len = rb - b0 < 128 ? rb - b0 : 128, run = row_tiled_offset(64 * b, b0, rb);
        EXPECT_EQ(run, 64 * b * rb + 64 * b0);
        for (int64_t r = 0; r < 64; ++r)
          for (int64_t at = 0; at < len; ++at) ASSERT_EQ(row_tiled_offset(64 * b + r, b0 + at, rb), run + r * len + at);
      }
  }
  // Rows of 704 bytes: the last stage (bytes 640 .. 703) of row 64 + 5, block 1: 64 rows x 704 before it, five whole
  // stages.
  EXPECT_EQ(row_tiled_offset(64 + 5, 650, 704), 64 * 704 + 5 * 8192 + 5 * 64 + 10);
  EXPECT_TRUE(row_tiles_ok(DType::kFp8, Shape{128, 2816, 704}));
  EXPECT_TRUE(row_tiles_ok(DType::kBF16, Shape{128, 1408, 2816}));
  EXPECT_TRUE(row_tiles_ok(DType::kBF16, Shape{2, 128, 72}));  // 144 bytes a row
  EXPECT_FALSE(row_tiles_ok(DType::kFp8, Shape{2, 64, 96}));
  EXPECT_FALSE(row_tiles_ok(DType::kFp8, Shape{2, 128, 40}));
  EXPECT_FALSE(row_tiles_ok(DType::kQ4, Shape{2, 128, 128}));
  EXPECT_EQ(tile_row_bytes(DType::kBF16, Shape{2, 128, 72}), 144);
}

TEST(RowTiles, TheTwinKeepsEveryByte) {
  using Case = std::pair<DType, Shape>;
  for (const auto& [dtype, s] : {Case{DType::kFp8, Shape{2, 128, 704}}, Case{DType::kFp8, Shape{1, 256, 352}},
                                 Case{DType::kBF16, Shape{2, 128, 352}}, Case{DType::kBF16, Shape{1, 128, 72}}}) {
    const int64_t rb = tile_row_bytes(dtype, s), rows = s.numel() / s[s.rank - 1];
    std::vector<uint8_t> rowwise(static_cast<size_t>(rows * rb) + 64);  // fp8's scale plane after the codes
    for (size_t i = 0; i < rowwise.size(); ++i) rowwise[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
    std::vector<uint8_t> tiled = rowwise;
    to_row_tiles(tiled.data(), dtype, s);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t at = 0; at < rb; ++at)
        ASSERT_EQ(row_tiled_byte(tiled.data(), dtype, s, r, at), rowwise[static_cast<size_t>(r * rb + at)])
            << r << ", " << at;
    for (size_t i = static_cast<size_t>(rows * rb); i < tiled.size(); ++i) EXPECT_EQ(tiled[i], rowwise[i]);
    EXPECT_NE(tiled, rowwise);
  }
  std::vector<uint8_t> small(64 * 96);
  EXPECT_THROW(to_row_tiles(small.data(), DType::kFp8, Shape{1, 64, 96}), Error);
  EXPECT_THROW(to_row_tiles(small.data(), DType::kQ4, Shape{1, 128, 96}), Error);
  EXPECT_THROW(row_tiled_byte(small.data(), DType::kFp8, Shape{1, 128, 96}, 128, 0), Error);
}

}  // namespace
}  // namespace dg
