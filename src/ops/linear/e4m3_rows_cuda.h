// Our W8A8 product for at most 256 activation rows (a canvas: the single sequence's denoise step) on Hopper's e4m3
// tensor cores: the raw sums of x_codes · w_codesᵀ, as Fp8Gemm (src/backend/cuda/fp8_gemm.h) returns them through
// cuBLASLt, whose tiles at 256 rows fill a third of the SMs for the o and down products. Each CTA multiplies 128
// weight rows by every activation row over a slice of K; the slices of one column tile form a cluster whose CTAs add
// their partial sums through distributed shared memory in a fixed order (the same bits in every run). Design and
// measurements: docs/CUDA.md ("Our W8A8 product for few rows"). The CPU twin is the W8A8 `linear` of the reference
// backend; the test holds it to f64 sums of the same codes (tests/ops/e4m3_rows_test.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/status.h"

namespace dg {

inline constexpr int64_t kE4m3RowsMax = 256;  // activation rows the kernel takes

// Whether linear_e4m3_rows_cuda takes the call (rows, K and N, the pointers' alignment, the output's stride, a
// Hopper GPU with sm_90a code and the driver's TMA encoder); otherwise the reason, naming the bad input.
Status e4m3_rows_takes(int64_t rows, int64_t k, int64_t n, const void* xq, const void* wq, const void* out,
                       bool f32_out, int64_t ld);

// out [rows, n] (row r at out + r * ld elements; bf16, or f32 with f32_out) = xq [rows, k] e4m3 · wq [n, k]ᵀ e4m3,
// each sum over K in f32 (the tensor cores' sums of a 128-code slice added to f32) and rounded once. `splits`: the
// CTAs that share a column tile's K (1-4); 0 picks them from the shape and the GPU's cluster occupancy.
Status linear_e4m3_rows_cuda(const void* xq, int64_t rows, int64_t k, const void* wq, int64_t n, void* out,
                             bool f32_out, int64_t ld, cudaStream_t s, int splits = 0);

// The splits linear_e4m3_rows_cuda picks for n and k on this GPU (0 where the device cannot run it).
int e4m3_rows_splits(int64_t k, int64_t n);

}  // namespace dg
