// One value as an E4M3 code under a per-row scale: e4m3(v / s), rounded to nearest even and saturating; a zero scale
// (an all-zero row) gives code 0. The CPU twin: encode_rows(DType::kFp8) (src/quant/codec.cpp).
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

namespace dg::cuda {

__device__ __forceinline__ uint8_t e4m3_of(float v, float s) {
  return s > 0.0f ? static_cast<uint8_t>(__nv_cvt_float_to_fp8(v / s, __NV_SATFINITE, __NV_E4M3)) : uint8_t{0};
}

// The reciprocal of a row's scale for e4m3x2_times: 1 / s, or 0 for a zero scale (codes 0).
__device__ __forceinline__ float e4m3_reciprocal(float s) { return s > 0.0f ? 1.0f / s : 0.0f; }

// Two values' codes in one conversion (low byte: a), multiplied by the row's e4m3_reciprocal instead of divided by
// its scale: v * (1 / s) lies within an f32 ulp of v / s, so a code differs from e4m3_of's only where v / s sat
// within that ulp of a rounding boundary between two codes.
__device__ __forceinline__ uint16_t e4m3x2_times(float a, float b, float r) {
  return static_cast<uint16_t>(__nv_cvt_float2_to_fp8x2(make_float2(a * r, b * r), __NV_SATFINITE, __NV_E4M3));
}

}  // namespace dg::cuda
