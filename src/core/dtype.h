// Element types of stored tensors and the scalar codecs between them and f32.
// bf16 and f16 conversions round to nearest even, as torch's .to(dtype) does.
// The packed types are quantized weight formats: a tensor of one is a set of byte planes (codes, scales) whose
// layout is src/core/packed_layout.h; they have no per-element size. Byte layouts: docs/FORMATS.md.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dg {

enum class DType : uint8_t {
  kF32, kF16, kBF16, kI32, kI64, kU8, kBool,
  kQ4,     // group-32 affine, 4-bit codes, bf16 scale + min per group
  kQ6,     // group-32 affine, 6-bit codes, bf16 scale + min per group
  kQ8,     // per-row symmetric int8, f32 scale per row
  kNvFp4,  // E2M1 codes, FP8-E4M3 scale per 16, f32 global scale per matrix
  kFp8,    // FP8-E4M3 codes, f32 scale per row (output channel)
};

inline bool dtype_is_packed(DType t) { return t >= DType::kQ4; }

size_t dtype_size(DType t);  // bytes per element; throws dg::Error for a packed type
std::string_view dtype_name(DType t);

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

inline float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }
inline float round_f16(float f) { return f16_to_f32(f32_to_f16(f)); }

// Storage precision of activations or KV in the CPU reference: values stay f32 in memory but are rounded
// through the named type where a GPU would store them.
enum class Storage : uint8_t { kF32, kF16, kBF16 };

inline float round_to(Storage s, float f) {
  switch (s) {
    case Storage::kBF16: return round_bf16(f);
    case Storage::kF16: return round_f16(f);
    case Storage::kF32: break;
  }
  return f;
}

std::string_view storage_name(Storage s);
Storage storage_from_name(std::string_view name);  // "f32" | "f16" | "bf16"; throws dg::Error otherwise

// Reads element i of a contiguous buffer of a floating dtype as f32.
inline float load_f32(const void* data, DType t, size_t i) {
  switch (t) {
    case DType::kBF16: return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::kF16: return f16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::kF32: return static_cast<const float*>(data)[i];
    default: return NAN;
  }
}

// Converts n contiguous elements of a floating dtype to f32.
void convert_to_f32(const void* src, DType t, size_t n, float* dst);

}  // namespace dg
