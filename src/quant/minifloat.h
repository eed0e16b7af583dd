// The small floating-point codecs of the quantized formats: FP8 E4M3 (the "fn" variant: bias 7, no infinities,
// 0x7f/0xff NaN, largest finite 448), FP4 E2M1 (magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; sign in bit 3), and bf16
// with directed rounding. Encoders round to nearest even and saturate to the largest finite value, as the
// PTX cvt.rn.satfinite conversions do. Reference: the OCP Microscaling Formats (MX) v1.0 specification.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace dg {

namespace minifloat_detail {
constexpr float pow2(int k) {
  float v = 1.0f;
  for (; k > 0; --k) v *= 2.0f;
  for (; k < 0; ++k) v *= 0.5f;
  return v;
}
constexpr std::array<float, 256> e4m3_table() {
  std::array<float, 256> t{};
  for (int b = 0; b < 256; ++b) {
    const int e = (b >> 3) & 15, m = b & 7;
    float v = e == 0 ? static_cast<float>(m) * pow2(-9) : static_cast<float>(8 + m) * pow2(e - 10);
    if ((b & 0x7f) == 0x7f) v = std::numeric_limits<float>::quiet_NaN();
    t[static_cast<size_t>(b)] = (b & 0x80) != 0 ? -v : v;
  }
  return t;
}
}  // namespace minifloat_detail

// Decoded value of every E4M3 byte and of every E2M1 nibble.
inline constexpr std::array<float, 256> kE4m3Values = minifloat_detail::e4m3_table();
inline constexpr std::array<float, 16> kE2m1Values = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                                      -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

inline float e4m3_to_f32(uint8_t b) { return kE4m3Values[b]; }
inline float e2m1_to_f32(uint8_t nibble) { return kE2m1Values[nibble & 15]; }

uint8_t f32_to_e4m3(float x);  // NaN -> 0x7f; |x| >= 448 -> ±448
uint8_t f32_to_e2m1(float x);  // a nibble; |x| > 5 -> ±6

// bf16 bits of the largest bf16 <= x (round_down) or the smallest bf16 >= x (round_up), for finite x.
uint16_t bf16_round_down(float x);
uint16_t bf16_round_up(float x);

}  // namespace dg
