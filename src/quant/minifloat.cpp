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
  // Midpoints between neighbours; a tie goes to the even code (0, 1.0, 2.0, 4.0).
  uint8_t m;
  if (a <= 0.25f) m = 0;
  else if (a < 0.75f) m = 1;
  else if (a <= 1.25f) m = 2;
  else if (a < 1.75f) m = 3;
  else if (a <= 2.5f) m = 4;
  else if (a < 3.5f) m = 5;
  else if (a <= 5.0f) m = 6;
  else m = 7;
  return sign | m;
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
