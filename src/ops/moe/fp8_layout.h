// fp8 expert stacks in the streaming kernel's layout: each row of codes padded with zeros to whole 128-byte lines.
// The kernel copies a row's codes 128 bytes a stage; rows of 704 codes (the 26B-A4B down product) start on a line in
// every other row, so half of those copies straddle two L2 lines and the product ran at 69 % of bandwidth against
// 83 % for the gate_up product's whole-line rows (docs/CUDA.md, "fp8 rows on whole lines"). The pad is never read.
// Layout of a tensor of shape s = [n_exp, rows, K] (K % 128 != 0; others keep the disk layout):
//   codes  [n_exp * rows][fp8_kernel_pitch(K)] at 0, pad bytes zero
//   scales the disk layout's f32 per row, at fp8_kernel_scales_offset(s)
#pragma once

#include <cstdint>
#include <cstring>

#include "core/packed_layout.h"

namespace dg {

inline int64_t fp8_kernel_pitch(int64_t K) { return (K + 127) / 128 * 128; }
// Whether a tensor of shape s has a kernel layout of its own: an expert stack whose rows are not whole lines.
inline bool fp8_kernel_layout_differs(const Shape& s) { return s.rank == 3 && s[2] % 128 != 0; }
inline int64_t fp8_kernel_scales_offset(const Shape& s) {
  return (s[0] * s[1] * fp8_kernel_pitch(s[2]) + kPlaneAlign - 1) / kPlaneAlign * kPlaneAlign;
}
// Bytes of an fp8 tensor of shape s in the kernel layout (the disk layout's where it does not differ).
inline int64_t fp8_kernel_layout_bytes(const Shape& s) {
  if (!fp8_kernel_layout_differs(s)) return packed_layout(DType::kFp8, s).total;
  return fp8_kernel_scales_offset(s) + (4 * s[0] * s[1] + kPlaneAlign - 1) / kPlaneAlign * kPlaneAlign;
}

// Host twin of fp8_to_kernel_layout_cuda: `blob` (fp8_kernel_layout_bytes(s) bytes, the disk layout in its first
// packed_layout(kFp8, s).total) becomes the kernel layout in place. Every part moves to a higher offset, so the
// scales go first and the rows from the last.
inline void fp8_to_kernel_layout(uint8_t* blob, const Shape& s) {
  if (!fp8_kernel_layout_differs(s)) return;
  const PackedLayout L = packed_layout(DType::kFp8, s);
  const int64_t rows = s[0] * s[1], K = s[2], pitch = fp8_kernel_pitch(K);
  std::memmove(blob + fp8_kernel_scales_offset(s), blob + L.offset[1], static_cast<size_t>(4 * rows));
  for (int64_t r = rows - 1; r >= 0; --r) {
    std::memmove(blob + r * pitch, blob + L.offset[0] + r * K, static_cast<size_t>(K));
    std::memset(blob + r * pitch + K, 0, static_cast<size_t>(pitch - K));
  }
}

}  // namespace dg
