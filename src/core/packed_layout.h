// Byte layout of a packed (quantized) weight tensor: a fixed list of planes, each starting 64-byte aligned from
// the tensor's start, so a kernel gets every plane as an aligned base pointer plus row * row_bytes.
// A tensor [..., N, K] is R = numel / K rows of K elements (groups run along K, the input dimension) in
// M = numel / (N K) matrices (one per expert of a stack). Pure arithmetic, shared by the encoder, the CPU
// decoder, the pack reader and the CUDA kernels. Every format's planes: docs/FORMATS.md.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/tensor.h"

namespace dg {

inline constexpr int64_t kPlaneAlign = 64;
inline constexpr int kMaxPlanes = 3;

struct PackedLayout {
  int n_planes = 0;
  int64_t rows = 0, cols = 0, matrices = 0;  // R, K, M
  // Per plane: bytes per row for a row plane, or bytes per matrix for a matrix plane (nvfp4's global scales).
  int64_t row_bytes[kMaxPlanes] = {};
  int64_t matrix_bytes[kMaxPlanes] = {};
  int64_t offset[kMaxPlanes] = {};  // from the tensor's start; multiples of kPlaneAlign
  int64_t bytes[kMaxPlanes] = {};   // unpadded
  int64_t total = 0;                // every plane padded to kPlaneAlign
};

// Elements per scale group along K (the constraint K % group == 0); 0 for the per-row formats.
inline int64_t packed_group(DType fmt) {
  switch (fmt) {
    case DType::kQ4: case DType::kQ6: return 32;
    case DType::kNvFp4: return 16;
    default: return 0;
  }
}

// Why `s` cannot hold `fmt` (nullptr when it can): packed weights are matrices or stacks of them, and the group
// formats need K to be a multiple of the group.
inline const char* packed_shape_error(DType fmt, const Shape& s) {
  if (!dtype_is_packed(fmt)) return "not a packed format";
  if (s.rank < 2) return "a packed weight needs rank 2 or more";
  for (int i = 0; i < s.rank; ++i)
    if (s[i] <= 0) return "a packed weight needs non-empty dimensions";
  const int64_t g = packed_group(fmt);
  if (g == 32 && s[s.rank - 1] % 32 != 0) return "the last (input) dimension K must be a multiple of 32";
  if (g == 16 && s[s.rank - 1] % 16 != 0) return "the last (input) dimension K must be a multiple of 16";
  return nullptr;
}

// The planes of a packed tensor; the shape must pass packed_shape_error.
inline PackedLayout packed_layout(DType fmt, const Shape& s) {
  PackedLayout L;
  L.cols = s[s.rank - 1];
  L.rows = s.numel() / L.cols;
  L.matrices = L.rows / s[s.rank - 2];
  const int64_t K = L.cols;
  auto row_plane = [&](int64_t b) { L.row_bytes[L.n_planes++] = b; };
  switch (fmt) {
    case DType::kQ4: row_plane(K / 2); row_plane(K / 32 * 4); break;                  // codes | scale,min
    case DType::kQ6: row_plane(K / 2); row_plane(K / 4); row_plane(K / 32 * 4); break;  // low 4 | high 2 | scale,min
    case DType::kQ8: case DType::kFp8: row_plane(K); row_plane(4); break;               // codes | f32 scale
    case DType::kNvFp4:                                                                 // codes | e4m3 | global
      row_plane(K / 2);
      row_plane(K / 16);
      L.matrix_bytes[L.n_planes++] = 4;
      break;
    default: return L;
  }
  int64_t at = 0;
  for (int p = 0; p < L.n_planes; ++p) {
    L.offset[p] = at;
    L.bytes[p] = L.row_bytes[p] * L.rows + L.matrix_bytes[p] * L.matrices;
    at += (L.bytes[p] + kPlaneAlign - 1) / kPlaneAlign * kPlaneAlign;
  }
  L.total = at;
  return L;
}

}  // namespace dg
