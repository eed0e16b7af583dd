#include "core/dtype.h"

#include <cstring>

#include "core/error.h"

namespace dg {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: case DType::kI32: return 4;
    case DType::kF16: case DType::kBF16: return 2;
    case DType::kI64: return 8;
    case DType::kU8: case DType::kBool: return 1;
    case DType::kQ4: case DType::kQ6: case DType::kQ8: case DType::kNvFp4: case DType::kFp8: break;
  }
  fail("{} is a packed weight format with no per-element size", dtype_name(t));
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
    case DType::kU8: return "U8";
    case DType::kBool: return "BOOL";
    case DType::kQ4: return "q4";
    case DType::kQ6: return "q6";
    case DType::kQ8: return "q8";
    case DType::kNvFp4: return "nvfp4";
    case DType::kFp8: return "fp8";
  }
  return "?";
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      exp = 127 - 15 + 1;
      while ((man & 0x400u) == 0) { man <<= 1; --exp; }
      man &= 0x3ffu;
      bits = sign | (exp << 23) | (man << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t f32_to_f16(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {  // result is subnormal or zero: value * 2^24 rounded to nearest even
    const float scaled = std::bit_cast<float>(abs) * 16777216.0f;  // exact: abs < 2^-14
    const float r = std::nearbyint(scaled);                         // default rounding mode: nearest even
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(r));
  }
  uint32_t m = abs + 0xfffu + ((abs >> 13) & 1u);  // round mantissa to 10 bits, nearest even
  m -= (127u - 15u) << 23;
  return static_cast<uint16_t>(sign | static_cast<uint16_t>(m >> 13));
}

std::string_view storage_name(Storage s) {
  switch (s) {
    case Storage::kF32: return "f32";
    case Storage::kF16: return "f16";
    case Storage::kBF16: return "bf16";
  }
  return "?";
}

Storage storage_from_name(std::string_view name) {
  if (name == "f32") return Storage::kF32;
  if (name == "f16") return Storage::kF16;
  if (name == "bf16") return Storage::kBF16;
  fail("unknown precision '{}': expected f32, f16 or bf16", name);
}

void convert_to_f32(const void* src, DType t, size_t n, float* dst) {
  switch (t) {
    case DType::kF32: std::memcpy(dst, src, n * 4); return;
    case DType::kBF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::kF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    default: fail("convert_to_f32: {} is not a floating dtype", dtype_name(t));
  }
}

}  // namespace dg
