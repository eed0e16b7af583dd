// q4 and q6: group-32 affine codes along K. Per group: min_b = bf16 rounded down from the group minimum,
// scale_b = bf16 rounded up from (max - min_b) / (2^bits - 1), so every value lies in [min_b, min_b + L scale_b]
// and no code clamps; q = round((x - min_b) / scale_b); w = scale_b * q + min_b (the product is exact in f32).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/codec.h"
#include "quant/minifloat.h"

namespace dg {

namespace {

constexpr int64_t kGroup = 32;

void put_scale_min(uint8_t* dst, uint16_t scale, uint16_t min) {
  dst[0] = static_cast<uint8_t>(scale);
  dst[1] = static_cast<uint8_t>(scale >> 8);
  dst[2] = static_cast<uint8_t>(min);
  dst[3] = static_cast<uint8_t>(min >> 8);
}

}  // namespace

void encode_affine_rows(int bits, const float* x, int64_t n, int64_t K, uint8_t* const planes[kMaxPlanes]) {
  const float levels = bits == 4 ? 15.0f : 63.0f;
  const int64_t groups = K / kGroup;
  uint8_t* scale_plane = planes[bits == 4 ? 1 : 2];
  uint8_t q[kGroup];
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* xg = x + r * K + g * kGroup;
      const auto [lo, hi] = std::minmax_element(xg, xg + kGroup);
      const uint16_t min_b = bf16_round_down(*lo);
      const float min_f = bf16_to_f32(min_b);
      const uint16_t scale_b = bf16_round_up((*hi - min_f) / levels);
      const float scale_f = bf16_to_f32(scale_b);
      for (int64_t i = 0; i < kGroup; ++i) {
        const float v = scale_f > 0.0f ? std::nearbyint((xg[i] - min_f) / scale_f) : 0.0f;
        q[i] = static_cast<uint8_t>(std::clamp(v, 0.0f, levels));
      }
      uint8_t* codes = planes[0] + r * (K / 2) + g * (kGroup / 2);
      for (int64_t j = 0; j < kGroup / 2; ++j)
        codes[j] = static_cast<uint8_t>((q[2 * j] & 15) | ((q[2 * j + 1] & 15) << 4));
      if (bits == 6) {
        uint8_t* high = planes[1] + r * (K / 4) + g * (kGroup / 4);
        for (int64_t j = 0; j < kGroup / 4; ++j) {
          int b = 0;
          for (int i = 0; i < 4; ++i) b |= ((q[4 * j + i] >> 4) & 3) << (2 * i);
          high[j] = static_cast<uint8_t>(b);
        }
      }
      put_scale_min(scale_plane + (r * groups + g) * 4, scale_b, min_b);
    }
  }
}

void decode_affine_rows(int bits, const uint8_t* const planes[kMaxPlanes], int64_t n, int64_t K, float* y) {
  const int64_t groups = K / kGroup;
  const uint8_t* scale_plane = planes[bits == 4 ? 1 : 2];
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* codes = planes[0] + r * (K / 2);
    const uint8_t* high = bits == 6 ? planes[1] + r * (K / 4) : nullptr;
    for (int64_t g = 0; g < groups; ++g) {
      const uint8_t* sm = scale_plane + (r * groups + g) * 4;
      const float scale = bf16_to_f32(static_cast<uint16_t>(sm[0] | (sm[1] << 8)));
      const float min = bf16_to_f32(static_cast<uint16_t>(sm[2] | (sm[3] << 8)));
      for (int64_t i = g * kGroup; i < (g + 1) * kGroup; ++i) {
        int q = (codes[i / 2] >> (4 * (i % 2))) & 15;
        if (high != nullptr) q |= ((high[i / 4] >> (2 * (i % 4))) & 3) << 4;
        y[r * K + i] = scale * static_cast<float>(q) + min;
      }
    }
  }
}

}  // namespace dg
