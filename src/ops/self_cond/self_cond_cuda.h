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
// (CudaKernels::soft_probs_loads); the same bits either way. stats_done: `scratch` already holds the first pass's
// pairs (soft_probs_stats_cuda), which is not run again.
int64_t soft_probs_slices(int64_t rows, int64_t vocab);
Status soft_probs_cuda(const void* logits, int64_t rows, int64_t vocab, float sparse_cutoff, void* probs,
                       void* scratch, cudaStream_t s, int loads = 1, bool stats_done = false);
// The same probabilities as E4M3 codes [rows, vocab] under a per-row scale [rows] (the bf16 row's amax / 448, as
// act_quant_fp8_rows quantises it): the input of the fp8 soft embedding (--vocab-act fp8).
Status soft_probs_fp8_cuda(const void* logits, int64_t rows, int64_t vocab, float sparse_cutoff, void* codes,
                           float* scale, void* scratch, cudaStream_t s, int loads = 1, bool stats_done = false);
// The first pass alone: each slice's (max, sum of exp) pair into `scratch`.
Status soft_probs_stats_cuda(const void* logits, int64_t rows, int64_t vocab, void* scratch, cudaStream_t s,
                             int loads = 1);

// The survivor path (src/ops/self_cond/survivors.cu), the twin of soft_embed_cpu with a bf16 table and a cutoff:
// soft_survivors_cuda, after soft_probs_stats_cuda filled `scratch`, lists each row's tokens whose probability (as
// soft_probs_cuda rounds it) is at least cutoff * p_max: idx and p [rows, cap] (unordered), count [rows + 1] (the
// caller zeroes it first; count[r] is row r's survivors, or more than cap once the row overflowed, which also sets
// count[rows] to 1: the caller reads that flag and takes the dense product for the call). soft_gather_cuda then
// writes out[r] = bf16(sum of p E[v] over the row's survivors in vocabulary order, f32 accumulation) from the bf16
// table [vocab, hidden] (hidden a multiple of 8, the table 16-byte aligned); a row past cap is left unwritten. The
// embedding scale is the caller's, as after the dense product. cap: 1 to kSurvivorCapMax (self_cond.h). Inside a
// graph capture, `overflow` (a condition of the graph) is set to count[rows] != 0 on every launch, so that a branch
// (an IF node) takes the product there without the host reading the flag.
Status soft_survivors_cuda(const void* logits, int64_t rows, int64_t vocab, float cutoff, const void* scratch,
                           int cap, int32_t* idx, float* p, int32_t* count, cudaStream_t s);
Status soft_gather_cuda(const int32_t* idx, const float* p, const int32_t* count, int64_t rows, int cap,
                        const void* table, int64_t hidden, void* out, cudaStream_t s,
                        const cudaGraphConditionalHandle* overflow = nullptr);

}  // namespace dg
#endif
