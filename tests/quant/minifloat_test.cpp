// The small-float codecs against hand-computed encodings: FP8 E4M3 and FP4 E2M1 values, round-to-nearest-even
// ties, saturation, every code round-tripping; bf16 directed rounding.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

#include "core/dtype.h"
#include "quant/minifloat.h"

namespace dg {
namespace minifloat_test {

TEST(Minifloat, E4m3KnownValues) {
  EXPECT_EQ(f32_to_e4m3(1.0f), 0x38);
  EXPECT_EQ(f32_to_e4m3(0.5f), 0x30);
  EXPECT_EQ(f32_to_e4m3(-2.0f), 0xC0);
  EXPECT_EQ(f32_to_e4m3(3.0f), 0x44);
  EXPECT_EQ(f32_to_e4m3(448.0f), 0x7E);
  EXPECT_EQ(f32_to_e4m3(0.015625f), 0x08);   // 2^-6, the smallest normal
  EXPECT_EQ(f32_to_e4m3(0.001953125f), 0x01);  // 2^-9, the smallest subnormal
  EXPECT_EQ(f32_to_e4m3(0.0f), 0x00);
  EXPECT_EQ(f32_to_e4m3(-0.0f), 0x80);
  EXPECT_FLOAT_EQ(e4m3_to_f32(0x7E), 448.0f);
  EXPECT_FLOAT_EQ(e4m3_to_f32(0x44), 3.0f);
  EXPECT_FLOAT_EQ(e4m3_to_f32(0x01), 0.001953125f);
  EXPECT_FLOAT_EQ(e4m3_to_f32(0x07), 7.0f / 512.0f);   // the largest subnormal, 7 * 2^-9
  EXPECT_FLOAT_EQ(e4m3_to_f32(0x0F), 15.0f / 512.0f);  // 1.875 * 2^-6
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xFF)));
}

TEST(Minifloat, E4m3RoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(f32_to_e4m3(1.0625f), 0x38);  // tie between 1.0 (even) and 1.125
  EXPECT_EQ(f32_to_e4m3(1.1875f), 0x3A);  // tie between 1.125 and 1.25 (even)
  EXPECT_EQ(f32_to_e4m3(1.06f), 0x38);  // either side of the midpoint 1.0625
  EXPECT_EQ(f32_to_e4m3(1.07f), 0x39);
  EXPECT_EQ(f32_to_e4m3(0.00048828125f), 0x00);  // 2^-11: a quarter step rounds to zero
  EXPECT_EQ(f32_to_e4m3(0.0029296875f), 0x02);   // 1.5 * 2^-9: tie between 1 and 2 steps -> 2 (even)
  EXPECT_EQ(f32_to_e4m3(0.0146484375f), 0x08);   // 7.5 * 2^-9: tie -> 8 steps = the smallest normal
  EXPECT_EQ(f32_to_e4m3(460.0f), 0x7E);
  EXPECT_EQ(f32_to_e4m3(1e9f), 0x7E);
  EXPECT_EQ(f32_to_e4m3(-INFINITY), 0xFE);
  EXPECT_EQ(f32_to_e4m3(NAN), 0x7F);
}

TEST(Minifloat, E4m3EveryCodeRoundTrips) {
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7F) == 0x7F) continue;
    EXPECT_EQ(f32_to_e4m3(e4m3_to_f32(static_cast<uint8_t>(b))), b) << "code " << b;
  }
}

// Nearest E4M3 magnitude code by exhaustive search, ties to the even code, saturating at 448.
uint8_t e4m3_brute(float a) {
  int best = 0;
  for (int c = 1; c <= 0x7E; ++c) {
    const float d = std::fabs(e4m3_to_f32(static_cast<uint8_t>(c)) - a);
    const float db = std::fabs(e4m3_to_f32(static_cast<uint8_t>(best)) - a);
    if (d < db || (d == db && (c & 1) == 0)) best = c;
  }
  return static_cast<uint8_t>(best);
}

TEST(Minifloat, E4m3MatchesExhaustiveNearestEven) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> log2_mag(-12.0f, 9.5f);
  for (int i = 0; i < 20000; ++i) {
    const float a = std::exp2(log2_mag(rng));
    ASSERT_EQ(f32_to_e4m3(a), e4m3_brute(a)) << a;
    ASSERT_EQ(f32_to_e4m3(-a), e4m3_brute(a) | 0x80) << -a;
  }
  for (int c = 0; c < 0x7E; ++c) {  // every midpoint between neighbours is a tie
    const float mid = 0.5f * (e4m3_to_f32(static_cast<uint8_t>(c)) + e4m3_to_f32(static_cast<uint8_t>(c + 1)));
    ASSERT_EQ(f32_to_e4m3(mid), (c & 1) == 0 ? c : c + 1) << mid;
  }
}

TEST(Minifloat, E2m1KnownValuesAndTies) {
  const float mags[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (int c = 0; c < 8; ++c) {
    EXPECT_EQ(f32_to_e2m1(mags[c]), c);
    EXPECT_EQ(f32_to_e2m1(-mags[c]), c | 8);
    EXPECT_EQ(e2m1_to_f32(static_cast<uint8_t>(c)), mags[c]);
    EXPECT_EQ(e2m1_to_f32(static_cast<uint8_t>(c | 8)), -mags[c]);
  }
  EXPECT_EQ(f32_to_e2m1(0.25f), 0);  // ties go to the even code
  EXPECT_EQ(f32_to_e2m1(0.75f), 2);
  EXPECT_EQ(f32_to_e2m1(1.25f), 2);
  EXPECT_EQ(f32_to_e2m1(1.75f), 4);
  EXPECT_EQ(f32_to_e2m1(2.5f), 4);
  EXPECT_EQ(f32_to_e2m1(3.5f), 6);
  EXPECT_EQ(f32_to_e2m1(5.0f), 6);
  EXPECT_EQ(f32_to_e2m1(0.26f), 1);
  EXPECT_EQ(f32_to_e2m1(5.01f), 7);
  EXPECT_EQ(f32_to_e2m1(100.0f), 7);
  EXPECT_EQ(f32_to_e2m1(-2.6f), 0xD);
}

TEST(Minifloat, Bf16DirectedRounding) {
  const float x = 1.0f + 1.0f / 512.0f;  // between bf16 1.0 and 1.0078125
  EXPECT_EQ(bf16_round_down(x), 0x3F80);
  EXPECT_EQ(bf16_round_up(x), 0x3F81);
  EXPECT_EQ(bf16_round_down(-x), 0xBF81);  // -1.0078125 <= -x
  EXPECT_EQ(bf16_round_up(-x), 0xBF80);
  EXPECT_EQ(bf16_round_down(2.0f), 0x4000);  // exact values stay
  EXPECT_EQ(bf16_round_up(-8.0f), 0xC100);
  EXPECT_EQ(bf16_round_up(0.0f), 0x0000);
  for (float v : {0.1f, -0.37f, 3.3e-5f, -1234.5f}) {
    EXPECT_LE(bf16_to_f32(bf16_round_down(v)), v);
    EXPECT_GE(bf16_to_f32(bf16_round_up(v)), v);
    EXPECT_EQ(bf16_round_up(v) - bf16_round_down(v), v > 0 ? 1 : -1) << v;
  }
}

}  // namespace minifloat_test
}  // namespace dg
