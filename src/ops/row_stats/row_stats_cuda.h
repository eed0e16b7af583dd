// The CUDA launchers of row_stats.h. Only the .cu files, the CUDA backend and the CUDA tests include this header,
// so a source that includes row_stats.h for its CPU reference compiles the same with and without DG_WITH_CUDA (and a
// CUDA build takes it from the compiler cache).
#pragma once

#include "ops/row_stats/row_stats.h"

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include "core/status.h"

namespace dg {

// How a slice's entries are summed (CudaKernels::row_stats_groups). kEach: each entry's e^d and e^d d into the f64
// sums, two loads in flight. kGroups: four entries at a time (the running max moves once a group, the four terms
// summed in f32, then into the f64 sums), four loads in flight: fewer instructions an entry, the same argmax and
// tempered logits, entropy and p_max within about 1e-7 relative of kEach's (not bit for bit). kGroups needs
// vocab % 4 == 0; other widths take kEach.
enum class RowStatsForm { kEach, kGroups };

// Row statistics of f32 logits: writes RowStats (device memory, same layout) and the tempered logits bf16(raw / T)
// for self-conditioning. Same semantics as row_stats_cpu (entropy and p_max from f64 sums, merged in a fixed order:
// deterministic); each row is split into slices over several blocks so a canvas fills the GPU.
Status row_stats_cuda(const float* raw, int64_t rows, int64_t vocab, float temperature, void* tempered_bf16,
                      RowStats* stats, cudaStream_t s, RowStatsForm form = RowStatsForm::kEach);
// Logits the lm_head left open: raw sums whose last elementwise step row_stats_open_cuda applies as it reads them,
// as softcap_cuda (row_scale and col_scale null) or softcap_scaled_cuda (a W8A8 product's raw sums, its input rows'
// scales [rows] and the table rows' [vocab]) would, the same cap.
struct OpenLogitsIn {
  const float* row_scale = nullptr;
  const float* col_scale = nullptr;
  float cap = 0.0f;
  bool finish = false;  // store the finished logits back in place (a draw or a later reader needs them)
};
// row_stats_cuda of the finished logits, finishing them on the way (one pass instead of the softcap's and the
// statistics'): the same statistics and tempered logits as the softcap pass followed by row_stats_cuda, bit for
// bit. Scaled sums need vocab % 4 == 0 and 16-byte aligned raw and col_scale.
Status row_stats_open_cuda(float* raw, int64_t rows, int64_t vocab, const OpenLogitsIn& open, float temperature,
                           void* tempered_bf16, RowStats* stats, cudaStream_t s,
                           RowStatsForm form = RowStatsForm::kEach);
// Inverse-CDF draws (device u [rows] -> ids [rows]) as categorical_draw: f64 sums over softmax(raw / T), in slices
// over the grid, then one scan of the slice holding u (categorical.cu).
Status categorical_cuda(const float* raw, int64_t rows, int64_t vocab, float temperature, const double* u,
                        int32_t* ids, cudaStream_t s);

}  // namespace dg
#endif
