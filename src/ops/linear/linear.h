// Bias-free linear layer: y[r, o] = sum_i x[r, i] * W[o, i], with W stored [out, in] like nn.Linear.weight.
// Weights may be bf16/f16/f32 or a packed format (src/quant/): rows are converted or dequantised to f32, then
// multiplied in f32 (dequantise-then-f32 GEMM, the reference for quantized kernels).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace dg {

// x: [rows, in] f32; w: [out, in]; y: [rows, out] f32 (must not alias x).
void linear_cpu(const float* x, int64_t rows, int64_t in, const Tensor& w, float* y);

// The same product with weight rows [w_row0, w_row0 + out) of w seen as [R, in] (one expert of a stack).
void linear_cpu_rows(const float* x, int64_t rows, int64_t in, const Tensor& w, int64_t w_row0, int64_t out, float* y);

// f32 dot product with a fixed 8-lane accumulation order (deterministic; vectorisable).
float dot_f32(const float* a, const float* b, int64_t n);

}  // namespace dg
