// Dispatch, and the two per-row-scaled formats: q8 (symmetric int8) and fp8 (E4M3), each with an f32 scale per
// row = amax / qmax.
#include "quant/codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "quant/minifloat.h"

namespace dg {

namespace {

float row_amax(const float* x, int64_t K) {
  float a = 0.0f;
  for (int64_t k = 0; k < K; ++k) a = std::max(a, std::fabs(x[k]));
  return a;
}

// q8: q = clamp(round(x / scale), -127, 127) with scale = amax / 127; w = scale * q.
void encode_q8_rows(const float* x, int64_t n, int64_t K, uint8_t* const planes[kMaxPlanes]) {
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x + r * K;
    const float scale = row_amax(xr, K) / 127.0f;
    auto* codes = reinterpret_cast<int8_t*>(planes[0] + r * K);
    for (int64_t k = 0; k < K; ++k) {
      const float q = scale > 0.0f ? std::nearbyint(xr[k] / scale) : 0.0f;
      codes[k] = static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f));
    }
    std::memcpy(planes[1] + r * 4, &scale, 4);
  }
}

void decode_q8_rows(const uint8_t* const planes[kMaxPlanes], int64_t n, int64_t K, float* y) {
  for (int64_t r = 0; r < n; ++r) {
    float scale;
    std::memcpy(&scale, planes[1] + r * 4, 4);
    const auto* codes = reinterpret_cast<const int8_t*>(planes[0] + r * K);
    for (int64_t k = 0; k < K; ++k) y[r * K + k] = scale * static_cast<float>(codes[k]);
  }
}

// fp8: code = e4m3(x / scale) with scale = amax / 448; w = e4m3(code) * scale.
void encode_fp8_rows(const float* x, int64_t n, int64_t K, uint8_t* const planes[kMaxPlanes]) {
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x + r * K;
    const float scale = row_amax(xr, K) / 448.0f;
    uint8_t* codes = planes[0] + r * K;
    for (int64_t k = 0; k < K; ++k) codes[k] = scale > 0.0f ? f32_to_e4m3(xr[k] / scale) : 0;
    std::memcpy(planes[1] + r * 4, &scale, 4);
  }
}

void decode_fp8_rows(const uint8_t* const planes[kMaxPlanes], int64_t n, int64_t K, float* y) {
  for (int64_t r = 0; r < n; ++r) {
    float scale;
    std::memcpy(&scale, planes[1] + r * 4, 4);
    const uint8_t* codes = planes[0] + r * K;
    for (int64_t k = 0; k < K; ++k) y[r * K + k] = e4m3_to_f32(codes[k]) * scale;
  }
}

}  // namespace

float nvfp4_global_scale(float amax) { return amax / (6.0f * 448.0f); }

void encode_rows(DType fmt, const float* x, int64_t n, int64_t K, float global, uint8_t* const planes[kMaxPlanes]) {
  switch (fmt) {
    case DType::kQ4: return encode_affine_rows(4, x, n, K, planes);
    case DType::kQ6: return encode_affine_rows(6, x, n, K, planes);
    case DType::kQ8: return encode_q8_rows(x, n, K, planes);
    case DType::kFp8: return encode_fp8_rows(x, n, K, planes);
    case DType::kNvFp4: return encode_nvfp4_rows(x, n, K, global, planes);
    default: fail("encode_rows: {} is not a packed format", dtype_name(fmt));
  }
}

void decode_rows(DType fmt, const uint8_t* const planes[kMaxPlanes], int64_t n, int64_t K, float global, float* y) {
  switch (fmt) {
    case DType::kQ4: return decode_affine_rows(4, planes, n, K, y);
    case DType::kQ6: return decode_affine_rows(6, planes, n, K, y);
    case DType::kQ8: return decode_q8_rows(planes, n, K, y);
    case DType::kFp8: return decode_fp8_rows(planes, n, K, y);
    case DType::kNvFp4: return decode_nvfp4_rows(planes, n, K, global, y);
    default: fail("decode_rows: {} is not a packed format", dtype_name(fmt));
  }
}

}  // namespace dg
