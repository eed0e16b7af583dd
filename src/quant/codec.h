// Row codecs of the packed weight formats: n rows of K f32 values to and from their planes (src/core/packed_layout.h).
// planes[p] points at plane p's bytes for the first of the n rows; a row plane advances row_bytes[p] per row.
// Every decoded weight is produced by exactly one f32 rounding (the products before it are exact), so a GPU
// kernel that evaluates the same expression in f32 reproduces these values bit for bit. Layouts and the
// encoders' choices: docs/FORMATS.md.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/packed_layout.h"

namespace dg {

// nvfp4's per-matrix global scale from the matrix's largest magnitude: amax / (6 * 448), so the largest block
// scale lands on E4M3's largest finite value. 0 for an all-zero matrix.
float nvfp4_global_scale(float amax);

// Encodes n finite rows. `global` is nvfp4's matrix scale (all n rows must belong to one matrix); ignored otherwise.
void encode_rows(DType fmt, const float* x, int64_t n, int64_t K, float global, uint8_t* const planes[kMaxPlanes]);
void decode_rows(DType fmt, const uint8_t* const planes[kMaxPlanes], int64_t n, int64_t K, float global, float* y);

// The per-format bodies (dispatched by the two functions above).
void encode_affine_rows(int bits, const float* x, int64_t n, int64_t K, uint8_t* const planes[kMaxPlanes]);
void decode_affine_rows(int bits, const uint8_t* const planes[kMaxPlanes], int64_t n, int64_t K, float* y);
void encode_nvfp4_rows(const float* x, int64_t n, int64_t K, float global, uint8_t* const planes[kMaxPlanes]);
void decode_nvfp4_rows(const uint8_t* const planes[kMaxPlanes], int64_t n, int64_t K, float global, float* y);

}  // namespace dg
