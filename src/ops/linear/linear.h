// Bias-free linear layer: y[r, o] = sum_i x[r, i] * W[o, i], with W stored [out, in] like nn.Linear.weight.
// Weights may be bf16/f16/f32 (converted to f32 per row); accumulation is f32.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace dg {

// x: [rows, in] f32; w: [out, in]; y: [rows, out] f32 (must not alias x).
void linear_cpu(const float* x, int64_t rows, int64_t in, const Tensor& w, float* y);

// The same product with a raw weight pointer: w_data holds `out` rows of `in` elements of dtype `wt`.
void linear_cpu_raw(const float* x, int64_t rows, int64_t in, const void* w_data, DType wt, int64_t out, float* y);

// f32 dot product with a fixed 8-lane accumulation order (deterministic; vectorisable).
float dot_f32(const float* a, const float* b, int64_t n);

}  // namespace dg
