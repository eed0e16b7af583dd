// Elementwise ops on activations: residual add, scalar scale, and the dtype conversions of uploads.
// CPU twins are the loops in the CPU backend (src/backend/cpu/cpu_backend.cpp): out = round(a + b), round(x * s).
#pragma once

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"

namespace dg {

// bf16 activations: out = bf16(a + b); x = bf16(x * s).
Status add_cuda(const void* a, const void* b, void* out, int64_t n, cudaStream_t s);
Status scale_cuda(void* x, float scale, int64_t n, cudaStream_t s);
// bf16 x[i] = bf16(synthetic_uniform(seed, i, scale, offset)) (synthetic_uniform.h; CPU twin: the CPU backend).
Status fill_uniform_cuda(void* x, int64_t n, uint64_t seed, float scale, float offset, cudaStream_t s);
// Random codes and finite scales in the planes of a packed tensor of `shape` (q4, q8, fp8, nvfp4; synthetic
// benchmark weights): every decoded weight lies in [-amax, amax].
Status fill_packed_cuda(void* base, DType fmt, const Shape& shape, uint64_t seed, float amax, cudaStream_t s);
// bf16 src [rows, sum widths] into n <= 4 bf16 outputs [rows, widths[i]] (column blocks in order; every width a
// multiple of 8): the split after one product over weights stored side by side.
Status split_cols_cuda(const void* src, int64_t rows, void* const* dst, const int64_t* widths, int n, cudaStream_t s);
// bf16 dst [cols, rows] = src [rows, cols] transposed.
Status transpose_cuda(const void* src, int64_t rows, int64_t cols, void* dst, cudaStream_t s);
// Converts n elements of `src` (f32/f16/bf16) to bf16, or f32 to f32/f16/bf16 (dst dtype).
Status convert_cuda(const void* src, DType st, void* dst, DType dt, int64_t n, cudaStream_t s);

}  // namespace dg
#endif
