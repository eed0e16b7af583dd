// The CUDA launchers of logits.h. Only the .cu files, the CUDA backend and the CUDA tests include this header,
// so a source that includes logits.h for its CPU reference compiles the same with and without DG_WITH_CUDA (and a
// CUDA build takes it from the compiler cache).
#pragma once

#include "ops/logits/logits.h"

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include "core/status.h"

namespace dg {

// In place on the f32 lm_head product: l = cap * tanh(bf16(l) / cap) (cap <= 0: only the bf16 rounding).
Status softcap_cuda(float* logits, int64_t n, float cap, cudaStream_t s);
// The same on a W8A8 product's f32 sums [rows, vocab]: l = cap * tanh(bf16(sum * row_scale[r] * col_scale[c]) / cap)
// (the input row's and the table row's E4M3 scales, multiplied in that order). vocab % 4 == 0, every pointer
// 16-byte aligned, rows <= 65,535.
Status softcap_scaled_cuda(float* logits, int64_t rows, int64_t vocab, const float* row_scale, const float* col_scale,
                           float cap, cudaStream_t s);

}  // namespace dg
#endif
