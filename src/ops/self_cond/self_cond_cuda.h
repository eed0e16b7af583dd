// The CUDA launchers of self_cond.h. Only the .cu files, the CUDA backend and the CUDA tests include this header,
// so a source that includes self_cond.h for its CPU reference compiles the same with and without DG_WITH_CUDA (and a
// CUDA build takes it from the compiler cache).
#pragma once

#include "ops/self_cond/self_cond.h"

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include "core/status.h"

namespace dg {

// Row softmax of bf16 tempered logits [rows, vocab] to bf16 probabilities (f32 inside); with sparse_cutoff > 0 the
// tokens below cutoff * p_max are zeroed (the survivor path's result, computed densely). The soft embedding is then
// a GEMM probs x embed, scaled. Each row is cut into soft_probs_slices(rows, vocab) slices over as many blocks: one
// pass writes each slice's (max, sum of exp) to `scratch` (8 bytes per slice), a second merges a row's pairs in
// slice order and writes the probabilities. `loads`: 16-byte loads each thread keeps in flight, 1 or 4
// (CudaKernels::soft_probs_loads); the same bits either way.
int64_t soft_probs_slices(int64_t rows, int64_t vocab);
Status soft_probs_cuda(const void* logits, int64_t rows, int64_t vocab, float sparse_cutoff, void* probs,
                       void* scratch, cudaStream_t s, int loads = 1);
// The same probabilities as E4M3 codes [rows, vocab] under a per-row scale [rows] (the bf16 row's amax / 448, as
// act_quant_fp8_rows quantises it): the input of the fp8 soft embedding (--vocab-act fp8).
Status soft_probs_fp8_cuda(const void* logits, int64_t rows, int64_t vocab, float sparse_cutoff, void* codes,
                           float* scale, void* scratch, cudaStream_t s, int loads = 1);

}  // namespace dg
#endif
