// The CUDA launchers of attention_topk.h. Only the .cu files, the CUDA backend and the CUDA tests include this header,
// so a source that includes attention_topk.h for its CPU reference compiles the same with and without DG_WITH_CUDA (and a
// CUDA build takes it from the compiler cache).
#pragma once

#include "ops/attention/attention_topk.h"

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include "core/status.h"

namespace dg {

// The selection, softmax and gathered P V of top-k attention over scores already computed (the GEMM path's Q K^T):
// scores f32 [heads, rows, S] (key j at position key_pos0 + j; query r at q_pos0 + r), v bf16 [S, n_kv, D] (the
// gathered values), out bf16 [rows, heads * D]. One block per (head, row): a 4-pass radix select on the scores'
// order keys finds the k-th key, a block scan emits the kept keys in position order, then the f32 softmax and P V
// over them. topk must be on; a fixed k above kAttnTopkMax is an error.
Status attention_topk_select_cuda(const float* scores, const void* v, int64_t heads, int64_t rows, int64_t S,
                                  int64_t n_kv, int64_t head_dim, int64_t q_pos0, int64_t key_pos0, bool causal,
                                  int64_t window, const AttnTopk& topk, void* out, cudaStream_t s);

}  // namespace dg
#endif
