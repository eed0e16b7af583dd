// The CUDA launchers of rope.h. Only the .cu files, the CUDA backend and the CUDA tests include this header,
// so a source that includes rope.h for its CPU reference compiles the same with and without DG_WITH_CUDA (and a
// CUDA build takes it from the compiler cache).
#pragma once

#include "ops/rope/rope.h"

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include "core/status.h"

namespace dg {

// x: device bf16 [rows, heads, head_dim] rotated in place at positions pos0 + row; inv_freq: device f32 [head_dim/2].
Status rope_cuda(void* x, int64_t rows, int64_t heads, int64_t head_dim, int64_t pos0, const float* inv_freq,
                 cudaStream_t s);
// rope_cuda over several spans of x's `rows` rows (host array `spans`, read before the call returns) in one launch
// per kRopeSpansPerLaunch spans; spans within [0, rows), in row order, not overlapping (an error before any launch
// otherwise); rows of no span unchanged.
constexpr int kRopeSpansPerLaunch = 64;
Status rope_spans_cuda(void* x, int64_t rows, int64_t heads, int64_t head_dim, const RopeSpan* spans, int n_spans,
                       const float* inv_freq, cudaStream_t s);
// The rotation of every row and pair once, for the heads of a row to share (heads_norm_cuda's table): table
// [rows][half] of bf16 pairs (x: cos, y: sin of position * inv_freq[j], each rounded to bf16 as rope.h says; the
// sincosf of the fused norms, so the rotated values are the same bits). The spans cover the rows in order without
// gaps (an error otherwise, before any launch).
Status rope_table_cuda(const RopeSpan* spans, int n_spans, int64_t rows, int64_t half, const float* inv_freq,
                       void* table, cudaStream_t s);

}  // namespace dg
#endif
