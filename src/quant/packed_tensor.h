// Packed weight tensors as a whole: packing a float tensor, and reading rows of any weight (float or packed) as
// f32 — the dequantise-then-f32 reference that the CPU backend computes with and that every quantized GPU
// kernel is checked against.
#pragma once

#include <cstdint>

#include "core/packed_layout.h"
#include "core/tensor.h"

namespace dg {

// Plane pointers for row `row` of a packed tensor whose bytes start at `base`.
void plane_rows(const PackedLayout& L, const uint8_t* base, int64_t row, const uint8_t* out[kMaxPlanes]);
// nvfp4's global scale of matrix m.
float packed_global(const PackedLayout& L, const uint8_t* base, int64_t m);

// Per-matrix nvfp4 global scales of f32 rows [0, L.rows) in matrices of L.rows / L.matrices rows (tests and
// whole-tensor packing; the pack writer computes them while streaming).
void nvfp4_globals(const PackedLayout& L, const float* x, float* globals);

// Encodes rows [row0, row0 + n) given as f32 (x: n * K values) into per-plane destinations: dst[p] receives
// n * row_bytes[p] bytes for each row plane (matrix planes are the caller's). globals: nvfp4's per-matrix scales,
// indexed by absolute matrix. Parallel over rows; the result does not depend on the thread count.
void encode_tensor_rows(DType fmt, const PackedLayout& L, const float* x, int64_t row0, int64_t n,
                        const float* globals, uint8_t* const dst[kMaxPlanes]);

// A host copy of `src` (a float tensor of rank >= 2) in the packed format `fmt`. Throws dg::Error when the shape
// cannot hold the format or a value is not finite.
Tensor pack_tensor(const Tensor& src, DType fmt);

// Rows [row0, row0 + n) of a host weight seen as [R, K] (K its last dimension) as f32: float dtypes convert,
// packed dtypes decode.
void weight_rows_f32(const Tensor& w, int64_t row0, int64_t n, float* dst);

// The whole weight as an f32 host tensor of the same shape.
Tensor unpack_tensor(const Tensor& w);

}  // namespace dg
