// Host twin of the q4 kernel layout (q4_layout.h): the conversion, and the weight the kernel computes from it.
#include "ops/moe/q4_layout.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace dg {

void q4_to_kernel_layout(uint8_t* blob, const Shape& s) {
  const PackedLayout L = packed_layout(DType::kQ4, s);
  const int64_t groups = L.cols / 32, per_matrix = L.rows / L.matrices;
  auto* factors = reinterpret_cast<float*>(blob + q4_kernel_factor_offset(s));
  for (int64_t m = 0; m < L.matrices; ++m) {
    uint16_t top = 0;
    for (int64_t r = m * per_matrix; r < (m + 1) * per_matrix; ++r)
      for (int64_t g = 0; g < groups; ++g) {
        uint16_t sb;
        std::memcpy(&sb, blob + L.offset[1] + r * L.row_bytes[1] + 4 * g, 2);
        top = std::max<uint16_t>(top, sb & 0x7FFFu);
      }
    const int p = q4_kernel_power(top);
    factors[m] = std::ldexp(1.0f, p);
    for (int64_t r = m * per_matrix; r < (m + 1) * per_matrix; ++r) {
      uint8_t* codes = blob + L.offset[0] + r * L.row_bytes[0];
      const std::vector<uint8_t> disk(codes, codes + 16 * groups);
      for (int64_t g = 0; g < groups; ++g) {
        for (int t = 0; t < 4; ++t) {
          const uint32_t w = q4_kernel_word(disk.data() + 16 * g, t);
          std::memcpy(codes + q4_kernel_code_offset(g, t, groups), &w, 4);
        }
        uint8_t* sw = blob + L.offset[1] + r * L.row_bytes[1] + 4 * g;
        uint32_t word;
        std::memcpy(&word, sw, 4);
        word = q4_kernel_scale_word(word, p);
        std::memcpy(sw, &word, 4);
      }
    }
  }
}

namespace {

// The weight the kernel makes of element k of a row from its group's code word (lane t's) and scale word.
float kernel_weight_of(uint32_t w, uint32_t sw, int64_t k, float factor) {
  // Element e of a group sits in word t = (e / 2) % 4, pair j = e / 8 (bits 4j .. 4j + 3, + 16 for odd e).
  const int e = static_cast<int>(k % 32), j = e / 8;
  // As the kernel: pairs 0, 2 masked at bits 0-3 (value q 2^-133), pairs 1, 3 at bits 4-7 (q 2^-129, scale / 16);
  // pairs 2, 3 after a shift by 8. The halves: even e low, odd e high.
  const uint32_t src = j >= 2 ? w >> 8 : w;
  const uint32_t v = (src & ((j % 2) ? 0x00F000F0u : 0x000F000Fu)) >> (e % 2 ? 16 : 0) & 0xFFFFu;
  const double vq = static_cast<double>(q4_bf16_value(static_cast<uint16_t>(v)));  // exact: a bf16 subnormal
  float scale = q4_bf16_value(static_cast<uint16_t>(sw & 0xFFFFu));
  if (j % 2) scale = q4_bf16_value(q4_bf16_rne(scale / 16));  // the kernel's hmul2 by 2^-4, rounded to bf16
  const double min = q4_bf16_value(static_cast<uint16_t>(sw >> 16));
  // v scale + min in f64 is exact (a 4-bit by 8-bit product plus a bf16, all within 2^-133 .. 2^128); one rounding.
  const double exact = vq * static_cast<double>(scale) + min;
  return q4_bf16_value(q4_bf16_rne(static_cast<float>(exact))) * factor;
}

float matrix_factor(const uint8_t* blob, const Shape& s, const PackedLayout& L, int64_t row) {
  float factor;
  std::memcpy(&factor, blob + q4_kernel_factor_offset(s) + 4 * (row / (L.rows / L.matrices)), 4);
  return factor;
}

}  // namespace

float q4_kernel_weight(const uint8_t* blob, const Shape& s, int64_t row, int64_t k) {
  const PackedLayout L = packed_layout(DType::kQ4, s);
  DG_CHECK(row >= 0 && row < L.rows && k >= 0 && k < L.cols, "q4_kernel_weight: ({}, {}) outside [{}, {}]", row, k,
           L.rows, L.cols);
  const int64_t g = k / 32;
  const int t = static_cast<int>(k % 32 / 2 % 4);
  uint32_t w, sw;
  std::memcpy(&w, blob + L.offset[0] + row * L.row_bytes[0] + q4_kernel_code_offset(g, t, L.cols / 32), 4);
  std::memcpy(&sw, blob + L.offset[1] + row * L.row_bytes[1] + 4 * g, 4);
  return kernel_weight_of(w, sw, k, matrix_factor(blob, s, L, row));
}

void q4_to_tiled_layout(uint8_t* blob, const Shape& s) {
  DG_CHECK(q4_tiled_ok(s), "q4_to_tiled_layout: {} rows a matrix are not a multiple of 128", s[s.rank - 2]);
  const PackedLayout L = packed_layout(DType::kQ4, s);
  const int64_t groups = L.cols / 32;
  std::vector<uint8_t> tiled(static_cast<size_t>(20 * groups * L.rows));
  for (int64_t r = 0; r < L.rows; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      for (int t = 0; t < 4; ++t)
        std::memcpy(tiled.data() + q4_tiled_code_offset(r, g, t, groups),
                    blob + L.offset[0] + r * L.row_bytes[0] + q4_kernel_code_offset(g, t, groups), 4);
      std::memcpy(tiled.data() + q4_tiled_scale_offset(r, g, groups), blob + L.offset[1] + r * L.row_bytes[1] + 4 * g,
                  4);
    }
  std::memcpy(blob, tiled.data(), tiled.size());
}

float q4_tiled_weight(const uint8_t* blob, const Shape& s, int64_t row, int64_t k) {
  const PackedLayout L = packed_layout(DType::kQ4, s);
  DG_CHECK(row >= 0 && row < L.rows && k >= 0 && k < L.cols, "q4_tiled_weight: ({}, {}) outside [{}, {}]", row, k,
           L.rows, L.cols);
  const int64_t g = k / 32, groups = L.cols / 32;
  const int t = static_cast<int>(k % 32 / 2 % 4);
  uint32_t w, sw;
  std::memcpy(&w, blob + q4_tiled_code_offset(row, g, t, groups), 4);
  std::memcpy(&sw, blob + q4_tiled_scale_offset(row, g, groups), 4);
  return kernel_weight_of(w, sw, k, matrix_factor(blob, s, L, row));
}

}  // namespace dg
