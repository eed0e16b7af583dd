// nvfp4: E2M1 codes with an E4M3 scale per 16 elements along K and an f32 global scale per matrix (NVIDIA's
// two-level recipe). Block scale s = e4m3(amax_block / 6 / global); code = e2m1(x / (e4m3(s) * global));
// w = (e2m1(code) * e4m3(s)) * global, the first product exact in f32.
#include <algorithm>
#include <cmath>

#include "quant/codec.h"
#include "quant/minifloat.h"

namespace dg {

namespace {
constexpr int64_t kBlock = 16;
}  // namespace

void encode_nvfp4_rows(const float* x, int64_t n, int64_t K, float global, uint8_t* const planes[kMaxPlanes]) {
  const int64_t blocks = K / kBlock;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* xb = x + r * K + b * kBlock;
      float amax = 0.0f;
      for (int64_t i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(xb[i]));
      const uint8_t s = global > 0.0f ? f32_to_e4m3(amax / 6.0f / global) : 0;
      const float step = e4m3_to_f32(s) * global;
      uint8_t* codes = planes[0] + r * (K / 2) + b * (kBlock / 2);
      for (int64_t j = 0; j < kBlock / 2; ++j) {
        const uint8_t c0 = step > 0.0f ? f32_to_e2m1(xb[2 * j] / step) : 0;
        const uint8_t c1 = step > 0.0f ? f32_to_e2m1(xb[2 * j + 1] / step) : 0;
        codes[j] = static_cast<uint8_t>(c0 | (c1 << 4));
      }
      planes[1][r * blocks + b] = s;
    }
  }
}

void decode_nvfp4_rows(const uint8_t* const planes[kMaxPlanes], int64_t n, int64_t K, float global, float* y) {
  const int64_t blocks = K / kBlock;
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* codes = planes[0] + r * (K / 2);
    for (int64_t b = 0; b < blocks; ++b) {
      const float s = e4m3_to_f32(planes[1][r * blocks + b]);
      for (int64_t i = b * kBlock; i < (b + 1) * kBlock; ++i)
        y[r * K + i] = (e2m1_to_f32(static_cast<uint8_t>(codes[i / 2] >> (4 * (i % 2)))) * s) * global;
    }
  }
}

}  // namespace dg
