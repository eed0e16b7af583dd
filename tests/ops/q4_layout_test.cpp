// The q4 kernel layout's host twin (src/ops/moe/q4_layout.h): after q4_to_kernel_layout, every weight as the
// streaming kernel computes it (q4_kernel_weight: the masked code's subnormal value times the pre-scaled scale plus
// the pre-scaled min, rounded once to bf16, times the matrix's factor) equals the disk layout's decoded weight
// rounded to bf16 — the weight the disk-layout kernel feeds the tensor cores — at weight amplitudes from 1e-3 to
// 3e4 (matrix powers p from 0 to 17) and with an all-equal group. The GPU conversion is checked byte for byte
// against this twin in tests/ops/moe_stream_checks.cpp (DeviceWeights, used by the MoeStreamQuantCuda tests).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "ops/moe/q4_layout.h"
#include "quant/packed_tensor.h"
#include "support/seeded.h"

namespace dg {
namespace q4_layout_test {

TEST(Q4KernelLayout, WordHoldsTheLanesCodes) {
  uint8_t group[16];
  for (int j = 0; j < 16; ++j) group[j] = static_cast<uint8_t>(j | (15 - j) << 4);  // element 2j: j, 2j + 1: 15 - j
  for (int t = 0; t < 4; ++t) {
    const uint32_t w = q4_kernel_word(group, t);
    for (int j = 0; j < 4; ++j) {  // pair j: elements 2t + 8j (byte t + 4j, low) and 2t + 8j + 1 (high)
      EXPECT_EQ((w >> (4 * j)) & 0xF, static_cast<uint32_t>(t + 4 * j)) << t << " " << j;
      EXPECT_EQ((w >> (16 + 4 * j)) & 0xF, static_cast<uint32_t>(15 - t - 4 * j)) << t << " " << j;
    }
  }
}

TEST(Q4KernelLayout, ALanesWordsOfAStageAreContiguous) {
  // Ten groups: two whole stages (four groups each), then a stage of two.
  for (int t = 0; t < 4; ++t)
    for (int g = 0; g < 10; ++g) {
      const int64_t stage = g / 4, want = g < 8 ? 64 * stage + 16 * t + 4 * (g % 4) : 128 + 8 * t + 4 * (g % 4);
      EXPECT_EQ(q4_kernel_code_offset(g, t, 10), want) << "group " << g << ", lane " << t;
    }
  std::vector<int> seen(40, 0);  // every word of the row exactly once
  for (int t = 0; t < 4; ++t)
    for (int g = 0; g < 10; ++g) ++seen[static_cast<size_t>(q4_kernel_code_offset(g, t, 10) / 4)];
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 40);
}

TEST(Q4KernelLayout, PowerKeepsTheScaledScaleFinite) {
  EXPECT_EQ(q4_kernel_power(0), 0);
  EXPECT_EQ(q4_kernel_power(f32_to_bf16(1.0f / 64)), 0);  // 2^-6 2^133 = 2^127
  EXPECT_EQ(q4_kernel_power(f32_to_bf16(1.0f / 32)), 1);
  EXPECT_EQ(q4_kernel_power(f32_to_bf16(3.0f)), 7);
  for (float scale : {1e-3f, 1.0f / 64, 0.03f, 0.9f, 3.0f, 4000.0f}) {
    const uint16_t b = f32_to_bf16(scale);
    const int p = q4_kernel_power(b);
    const uint32_t w = q4_kernel_scale_word(b | static_cast<uint32_t>(f32_to_bf16(-0.5f)) << 16, p);
    const float s = bf16_to_f32(static_cast<uint16_t>(w & 0xFFFF));
    EXPECT_TRUE(std::isfinite(s)) << scale;
    EXPECT_EQ(static_cast<double>(s), std::ldexp(static_cast<double>(bf16_to_f32(b)), 133 - p)) << scale;
    EXPECT_EQ(bf16_to_f32(static_cast<uint16_t>(w >> 16)), std::ldexp(-0.5f, -p)) << scale;
  }
}

void check_weights(Shape s, float amp, uint64_t seed, bool flat_group) {
  const int64_t n = s.numel();
  std::vector<float> v = test::seeded_uniform(static_cast<size_t>(n), seed, -amp, amp, Storage::kBF16);
  if (flat_group) std::fill_n(v.begin() + 32, 32, v[32]);  // row 0's second group: all equal (scale 0 or one step)
  Tensor f = host_tensor(DType::kF32, s);
  std::copy(v.begin(), v.end(), f.f32());
  const Tensor packed = pack_tensor(f, DType::kQ4);
  const Tensor decoded = unpack_tensor(packed);
  std::vector<uint8_t> blob(static_cast<size_t>(q4_kernel_layout_bytes(s)), 0xAB);
  std::memcpy(blob.data(), packed.data, packed.nbytes());
  q4_to_kernel_layout(blob.data(), s);
  const int64_t K = s[s.rank - 1], rows = n / K;
  int64_t bad = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < K; ++k) {
      const float want = round_bf16(decoded.f32()[r * K + k]), got = q4_kernel_weight(blob.data(), s, r, k);
      if (got != want && bad++ < 5)
        ADD_FAILURE() << "amplitude " << amp << ": weight (" << r << ", " << k << ") " << got << ", want " << want;
    }
  EXPECT_EQ(bad, 0) << "amplitude " << amp;
}

TEST(Q4KernelLayout, KernelWeightsEqualTheRoundedDiskWeights) {
  check_weights(Shape{3, 40, 96}, 0.1f, 1, true);    // three matrices, K of three groups (a partial stage)
  check_weights(Shape{2, 16, 160}, 1e-3f, 2, false);
  check_weights(Shape{2, 16, 64}, 2.0f, 3, false);   // p = 1 .. 2
  check_weights(Shape{2, 16, 64}, 40.0f, 4, true);   // p about 6
  check_weights(Shape{7, 32}, 3e4f, 5, false);       // one matrix, p about 17
}

// The tiled form (q4_to_tiled_layout): every code and scale word of the kernel layout lands once, a stage of 64 rows
// is one run of 1,280 bytes a group, and every weight reads as in the kernel layout: K of three groups (one short
// stage), of 22 (five stages and a short one of two: the 26B-A4B down product's K 704), two and three matrices.
TEST(Q4TiledLayout, TilesHoldTheKernelLayoutsWords) {
  const int64_t groups = 22;
  std::vector<int> seen(static_cast<size_t>(20 * groups * 128), 0);
  for (int64_t r = 0; r < 128; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      for (int t = 0; t < 4; ++t) ++seen[static_cast<size_t>(q4_tiled_code_offset(r, g, t, groups))];
      ++seen[static_cast<size_t>(q4_tiled_scale_offset(r, g, groups))];
    }
  int64_t once = 0;
  for (size_t i = 0; i < seen.size(); i += 4) once += seen[i] == 1;
  EXPECT_EQ(once, 5 * groups * 128) << "every word of the two blocks exactly once";
  // Block 1, stage 2 starts after block 0's 1,280 G bytes and two stages of 5,120; row 3's words of group 9 (lane 2).
  EXPECT_EQ(q4_tiled_code_offset(64 + 3, 9, 2, groups), 1280 * groups + 2 * 5120 + 64 * 3 + 4 * (2 * 4 + 1));
  EXPECT_EQ(q4_tiled_scale_offset(64 + 3, 9, groups), 1280 * groups + 2 * 5120 + 4096 + 16 * 3 + 4);
  // The short last stage (groups 20, 21): rows of 32 code bytes, then 8 scale bytes a row.
  EXPECT_EQ(q4_tiled_code_offset(5, 21, 3, groups), 5 * 5120 + 32 * 5 + 4 * (3 * 2 + 1));
  EXPECT_EQ(q4_tiled_scale_offset(5, 21, groups), 5 * 5120 + 2048 + 8 * 5 + 4);
  EXPECT_FALSE(q4_tiled_ok(Shape{2, 64, 96}));
  EXPECT_TRUE(q4_tiled_ok(Shape{2, 128, 96}));
}

void check_tiled(Shape s, float amp, uint64_t seed) {
  const int64_t n = s.numel();
  std::vector<float> v = test::seeded_uniform(static_cast<size_t>(n), seed, -amp, amp, Storage::kBF16);
  Tensor f = host_tensor(DType::kF32, s);
  std::copy(v.begin(), v.end(), f.f32());
  const Tensor packed = pack_tensor(f, DType::kQ4);
  std::vector<uint8_t> kernel(static_cast<size_t>(q4_kernel_layout_bytes(s)), 0xAB);
  std::memcpy(kernel.data(), packed.data, packed.nbytes());
  q4_to_kernel_layout(kernel.data(), s);
  std::vector<uint8_t> tiled = kernel;
  q4_to_tiled_layout(tiled.data(), s);
  const int64_t K = s[s.rank - 1], rows = n / K;
  int64_t bad = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < K; ++k) {
      const float want = q4_kernel_weight(kernel.data(), s, r, k), got = q4_tiled_weight(tiled.data(), s, r, k);
      if (got != want && bad++ < 5) ADD_FAILURE() << "weight (" << r << ", " << k << ") " << got << ", want " << want;
    }
  EXPECT_EQ(bad, 0) << s.str();
}

TEST(Q4TiledLayout, TiledWeightsEqualTheKernelLayouts) {
  check_tiled(Shape{3, 128, 96}, 0.1f, 6);
  check_tiled(Shape{2, 256, 704}, 40.0f, 7);
  EXPECT_THROW(check_tiled(Shape{2, 64, 96}, 0.1f, 8), Error);
}

}  // namespace q4_layout_test
}  // namespace dg
