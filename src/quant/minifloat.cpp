#include "quant/minifloat.h"

#include <bit>
#include <cmath>

namespace dg {

uint8_t f32_to_e4m3(float x) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a >= 448.0f) return sign | 0x7e;
  if (a < 0.015625f) {  // below 2^-6: subnormal steps of 2^-9; 8 steps carries into the smallest normal (0x08)
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  }
  // Normal: round the f32 mantissa to 3 bits, nearest even, on the bit pattern (a carry steps the exponent), then
  // rebias the exponent from 127 to 7.
  const uint32_t u = std::bit_cast<uint32_t>(a);
  const uint32_t r = (u + 0x7FFFFu + ((u >> 20) & 1u)) >> 20;
  return sign | static_cast<uint8_t>(r - ((127u - 7u) << 3));
}

uint8_t f32_to_e2m1(float x) {
  const uint8_t sign = std::signbit(x) ? 0x8 : 0x0;
  const float a = std::fabs(x);
  // The number of midpoints below a: ties (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5) go to the even code.
  const int m = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
  return static_cast<uint8_t>(sign | m);
}

uint16_t bf16_round_down(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const auto hi = static_cast<uint16_t>(u >> 16);
  const bool exact = (u & 0xffffu) == 0;
  // Truncation rounds toward zero: down for positives, up for negatives (then step the magnitude once more).
  return (std::signbit(x) && !exact) ? static_cast<uint16_t>(hi + 1) : hi;
}

uint16_t bf16_round_up(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const auto hi = static_cast<uint16_t>(u >> 16);
  const bool exact = (u & 0xffffu) == 0;
  return (!std::signbit(x) && !exact) ? static_cast<uint16_t>(hi + 1) : hi;
}

}  // namespace dg
