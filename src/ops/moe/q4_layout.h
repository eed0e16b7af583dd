// q4 in the streaming kernel's layout (WeightLayout::kKernel): the disk layout (docs/FORMATS.md) rearranged on the
// device at upload so that the kernel turns a pair of codes into a bf16 pair of weights with a mask and one bf16x2
// fma (src/ops/moe/moe_stream_q4.cuh; why: docs/CUDA.md, "q4 in the kernel layout"). Same planes and sizes as the
// disk layout, plus an f32 per matrix after them:
// - codes: 32-bit word t of a group holds the eight codes mma lane t % 4 needs (q4_kernel_word), and a row's words
//   are ordered by block of four groups, then lane, then group (q4_kernel_code_offset);
// - scale,min: the word (bf16 scale 2^(133 - p), bf16 min 2^-p) (q4_kernel_scale_word), p >= 0 the matrix's power;
// - factors (at q4_kernel_factor_offset): f32 2^p per matrix, which the kernel's epilogue multiplies the sums by.
// The conversion's host twin (q4_to_kernel_layout) and the decode the kernel performs (q4_kernel_weight) are here
// too, for the tests; the CPU backend keeps reading the disk layout.
#pragma once

#include <cstdint>

#include "core/packed_layout.h"

#if defined(__CUDACC__)
#define DG_Q4_HD __host__ __device__
#else
#define DG_Q4_HD
#endif

namespace dg {

// The codes lane t (0..3) of an m16n8k16 quad needs from a group of 32 (`group`: its 16 disk bytes, element 2j in
// the low nibble of byte j): elements 2t, 2t + 1 at bits 0-3 and 16-19, 2t + 8, 2t + 9 at bits 4-7 and 20-23,
// 2t + 16, 2t + 17 at bits 8-11 and 24-27, 2t + 24, 2t + 25 at bits 12-15 and 28-31.
DG_Q4_HD inline uint32_t q4_kernel_word(const uint8_t* group, int t) {
  uint32_t w = 0;
  for (int j = 0; j < 4; ++j) {
    const uint32_t b = group[t + 4 * j];  // elements 2t + 8j (low nibble) and 2t + 8j + 1 (high nibble)
    w |= (b & 0xFu) << (4 * j) | (b >> 4) << (16 + 4 * j);
  }
  return w;
}

// Where word t of group g sits in a row of `groups` groups: the row's code bytes are blocks of four groups (64
// bytes, one kernel stage of 128 elements), and within a block of n groups (four, or the row's remainder) lane t's
// words of the block's groups are contiguous, so a lane reads its whole stage in one 16-byte load.
DG_Q4_HD inline int64_t q4_kernel_code_offset(int64_t g, int t, int64_t groups) {
  const int64_t block = g / 4, n = groups - 4 * block < 4 ? groups - 4 * block : 4;
  return 64 * block + 4 * (t * n + g % 4);
}

// bf16 bits of f rounded to nearest even (f finite).
DG_Q4_HD inline uint16_t q4_bf16_rne(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
DG_Q4_HD inline float q4_bf16_value(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}
DG_Q4_HD inline float q4_pow2(int e) {  // 2^e for -126 <= e <= 127
  const uint32_t u = static_cast<uint32_t>(e + 127) << 23;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}

// The smallest p >= 0 with scale 2^(133 - p) finite in bf16 for every scale of a matrix whose largest scale has the
// bf16 bits `max_scale` (scales are >= 0): the scale's exponent field plus 133 - p at most 254.
DG_Q4_HD inline int q4_kernel_power(uint16_t max_scale) {
  const int e = (max_scale >> 7) & 0xFF;
  return e > 121 ? e - 121 : 0;
}

// The disk scale word (bf16 scale | bf16 min << 16) in the kernel layout for power p: exact (powers of two of
// bf16 values within range), except a min below 2^(p - 126) in magnitude, which rounds once to a bf16 subnormal.
DG_Q4_HD inline uint32_t q4_kernel_scale_word(uint32_t disk, int p) {
  const float scale = q4_bf16_value(static_cast<uint16_t>(disk & 0xFFFFu));
  const float min = q4_bf16_value(static_cast<uint16_t>(disk >> 16));
  // 2^(133 - p) in two exact steps (f32 has no 2^133); the product stays below 2^128 by the choice of p.
  const float s = scale * q4_pow2(33 - p) * q4_pow2(100);
  const float m = min * q4_pow2(-(p / 2)) * q4_pow2(-(p - p / 2));
  return static_cast<uint32_t>(q4_bf16_rne(s)) | static_cast<uint32_t>(q4_bf16_rne(m)) << 16;
}

// Where the f32 factors 2^p (one per matrix) start: after the disk layout's planes (64-byte aligned).
inline int64_t q4_kernel_factor_offset(const Shape& s) { return packed_layout(DType::kQ4, s).total; }
// Bytes of a q4 tensor of shape s in the kernel layout.
inline int64_t q4_kernel_layout_bytes(const Shape& s) {
  const PackedLayout L = packed_layout(DType::kQ4, s);
  return L.total + (4 * L.matrices + kPlaneAlign - 1) / kPlaneAlign * kPlaneAlign;
}

// The tiled form of the kernel layout (WeightLayout::kTiled), for the warp-specialised kernel's producer: the same code
// and scale words, ordered so that a stage of 64 weight rows (128 elements each) is one contiguous run of bytes. A
// 64-row block b of the tensor's rows (rows counted over all its matrices) holds the row's K / 32 groups in stages of
// four; chunk (b, s) starts at byte 1280 G b + 5120 s (G = K / 32) and holds, for its n = min(4, G - 4 s) groups,
// the 64 rows' code bytes of the stage (16 n a row, in the kernel layout's order within the row) and then their
// scale words (4 n a row). The factors stay where the kernel layout keeps them. Rows of a matrix a multiple of 128
// (q4_tiled_ok): no block crosses a matrix, and a gated product's up rows (from ff = rows / 2) start a block.
// Reading 64-byte pieces of 64 rows 1,408 bytes apart ran at 2.3 TB/s on the H100, the same bytes as one run at
// 3.0 (docs/EXPERTS.md, "q4 in stage tiles").
constexpr int64_t kQ4TileRows = 64;
inline bool q4_tiled_ok(const Shape& s) { return s.rank >= 2 && s[s.rank - 2] % 128 == 0 && s[s.rank - 1] % 32 == 0; }
DG_Q4_HD constexpr int64_t q4_tiled_chunk(int64_t block, int64_t stage, int64_t groups) {
  return 1280 * groups * block + 5120 * stage;
}
// The groups of stage s of a row of `groups`: four, or the row's remainder.
DG_Q4_HD inline int q4_stage_groups(int64_t s, int64_t groups) {
  return static_cast<int>(groups - 4 * s < 4 ? groups - 4 * s : 4);
}
// Within a chunk of n groups, where row rr (of its 64) keeps its code bytes and its scale words: the one definition
// the conversion, its host twin and the kernel's consumers read.
DG_Q4_HD constexpr int q4_tile_codes_at(int rr, int n) { return 16 * n * rr; }
DG_Q4_HD constexpr int q4_tile_scales_at(int rr, int n) { return 1024 * n + 4 * n * rr; }
// Byte of word t of group g of row `row` (codes), and of the row's scale word of group g, in the tiled form.
DG_Q4_HD inline int64_t q4_tiled_code_offset(int64_t row, int64_t g, int t, int64_t groups) {
  const int n = q4_stage_groups(g / 4, groups), rr = static_cast<int>(row % kQ4TileRows);
  return q4_tiled_chunk(row / kQ4TileRows, g / 4, groups) + q4_tile_codes_at(rr, n) + 4 * (t * n + g % 4);
}
DG_Q4_HD inline int64_t q4_tiled_scale_offset(int64_t row, int64_t g, int64_t groups) {
  const int n = q4_stage_groups(g / 4, groups), rr = static_cast<int>(row % kQ4TileRows);
  return q4_tiled_chunk(row / kQ4TileRows, g / 4, groups) + q4_tile_scales_at(rr, n) + 4 * (g % 4);
}

// Host twin of q4_to_kernel_layout_cuda: `blob` (q4_kernel_layout_bytes(s) bytes, the disk layout in its first
// packed_layout(kQ4, s).total) becomes the kernel layout in place.
void q4_to_kernel_layout(uint8_t* blob, const Shape& s);
// Weight (row, k) of a kernel-layout blob as the kernel feeds it to the tensor cores, times its matrix's factor:
// bf16(v s + m) 2^p with v the masked code's subnormal value (docs/CUDA.md). Equals bf16(scale q + min) of the
// disk layout (the documented weight rounding of the disk-layout kernel) wherever the conversion is exact.
float q4_kernel_weight(const uint8_t* blob, const Shape& s, int64_t row, int64_t k);
// Host twin of q4_to_tiled_layout_cuda: a blob in the kernel layout becomes its tiled form in place (q4_tiled_ok(s)).
void q4_to_tiled_layout(uint8_t* blob, const Shape& s);
// q4_kernel_weight of a blob in the tiled form.
float q4_tiled_weight(const uint8_t* blob, const Shape& s, int64_t row, int64_t k);

}  // namespace dg
