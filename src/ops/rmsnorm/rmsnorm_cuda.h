// The CUDA launchers of rmsnorm.h. Only the .cu files, the CUDA backend and the CUDA tests include this header,
// so a source that includes rmsnorm.h for its CPU reference compiles the same with and without DG_WITH_CUDA (and a
// CUDA build takes it from the compiler cache).
#pragma once

#include "ops/rmsnorm/rmsnorm.h"
#include "ops/rope/rope.h"

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include "core/status.h"

namespace dg {

// CUDA RMSNorm: one thread block per row, f32 accumulation; x and y bf16/f16/f32 device pointers with row
// stride `dim`, w a device [dim] weight or null. Same semantics as rmsnorm_cpu (output rounded to y's dtype).
// bf16 rows of up to 1,024 elements (a multiple of 8, 16-byte aligned) take one warp each.
Status rmsnorm_cuda(const void* x, DType xt, const void* w, DType wt, void* y, DType yt, int64_t rows, int64_t dim,
                    float eps, cudaStream_t stream);
// rmsnorm_cuda of bf16 rows with a bf16 weight, and the E4M3 codes and scales of the stored rows that
// moe_act_quant_fp8_cuda would write from y (codes u8 [rows, dim], scale f32 [rows]): the same bytes, one launch.
// Needs rmsnorm_codes_fits (dim a multiple of 8 up to 4,096, 16-byte aligned x, w, y; 8-byte aligned codes).
bool rmsnorm_codes_fits(const void* x, const void* w, const void* y, const void* codes, int64_t dim);
Status rmsnorm_codes_cuda(const void* x, const void* w, void* y, int64_t rows, int64_t dim, float eps, void* codes,
                          float* scale, cudaStream_t stream);
// The composition rmsnorm then rope (src/ops/rope/rope.h) in one kernel: x, y bf16 [rows, heads, dim] (head_dim a
// multiple of 16 up to 1,024), w bf16 [dim] or null, positions pos0 + row, inv_freq device f32 [dim / 2]. The normed
// values are rounded to bf16 before the rotation, as the two kernels store them.
Status rmsnorm_rope_cuda(const void* x, const void* w, void* y, int64_t rows, int64_t heads, int64_t dim, float eps,
                         int64_t pos0, const float* inv_freq, cudaStream_t stream);

// The attention heads' norms in one launch (CPU twin: rmsnorm, then rope at each span's positions, block by block):
// up to three blocks of heads (q, k, v), block b's head h of row r read at src + r * ld + h * head_dim (the product
// of side-by-side weights, or each its own tensor) and written to dst [rows, heads, head_dim], normed by its weight w
// (null: none) and, with rope, rotated at position r + (pos0 - row0) of the span holding r. The spans cover the
// rows in order without gaps; head_dim a multiple of 16 up to 1,024, ld a multiple of 8, 16-byte aligned pointers
// (an error otherwise, before any launch). A block with col_scale reads a W8A8 product's raw sums: each value times
// row_scale[r] (the input row's scale) and then col_scale[h * head_dim + d] (the weight row's) before the norm.
constexpr int kHeadsBlocksMax = 3;
struct HeadsBlock {
  const void* src = nullptr;
  int64_t ld = 0, heads = 0;
  const void* w = nullptr;
  bool rope = false;
  void* dst = nullptr;
  void* dst16 = nullptr;  // also the bf16 results as f16 (the same bits as converting dst), or null
  const float* row_scale = nullptr;  // [rows] f32, with col_scale
  const float* col_scale = nullptr;  // [heads * head_dim] f32, 16-byte aligned, or null: src holds the values
};
// rope_table: rope_table_cuda's rotations of these rows and spans (computed once for the rows' heads; the same
// bits), or null: each head computes its own.
Status heads_norm_cuda(const HeadsBlock* blocks, int n_blocks, int64_t rows, int64_t head_dim, float eps,
                       const RopeSpan* spans, int n_spans, const float* inv_freq, cudaStream_t stream,
                       const void* rope_table = nullptr);

}  // namespace dg
#endif
