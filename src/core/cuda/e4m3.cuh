// One value as an E4M3 code under a per-row scale: e4m3(v / s), rounded to nearest even and saturating; a zero scale
// (an all-zero row) gives code 0. The CPU twin: encode_rows(DType::kFp8) (src/quant/codec.cpp).
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

namespace dg::cuda {

__device__ __forceinline__ uint8_t e4m3_of(float v, float s) {
  return s > 0.0f ? static_cast<uint8_t>(__nv_cvt_float_to_fp8(v / s, __NV_SATFINITE, __NV_E4M3)) : uint8_t{0};
}

}  // namespace dg::cuda
