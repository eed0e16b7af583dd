// The CUDA launchers of row_stats.h. Only the .cu files, the CUDA backend and the CUDA tests include this header,
// so a source that includes row_stats.h for its CPU reference compiles the same with and without DG_WITH_CUDA (and a
// CUDA build takes it from the compiler cache).
#pragma once

#include "ops/row_stats/row_stats.h"

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include "core/status.h"

namespace dg {

// Row statistics of f32 logits: writes RowStats (device memory, same layout) and the tempered logits bf16(raw / T)
// for self-conditioning. Same semantics as row_stats_cpu (entropy and p_max from f64 sums, merged in a fixed order:
// deterministic); each row is split into slices over several blocks so a canvas fills the GPU.
Status row_stats_cuda(const float* raw, int64_t rows, int64_t vocab, float temperature, void* tempered_bf16,
                      RowStats* stats, cudaStream_t s);
// Inverse-CDF draws (device u [rows] -> ids [rows]) as categorical_draw: f64 sums over softmax(raw / T), in slices
// over the grid, then one scan of the slice holding u (categorical.cu).
Status categorical_cuda(const float* raw, int64_t rows, int64_t vocab, float temperature, const double* u,
                        int32_t* ids, cudaStream_t s);

}  // namespace dg
#endif
