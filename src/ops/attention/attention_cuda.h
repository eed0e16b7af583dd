// The CUDA launchers of attention.h. Only the .cu files, the CUDA backend and the CUDA tests include this header,
// so a source that includes attention.h for its CPU reference compiles the same with and without DG_WITH_CUDA (and a
// CUDA build takes it from the compiler cache).
#pragma once

#include "ops/attention/attention.h"

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include <span>

#include "core/status.h"

namespace dg {

// Keys/values held in a KV cache layer: f16 [cap, n_kv, head_dim]; position p lives in slot p % cap (ring) or p.
struct CachedKv {
  const void* k = nullptr;
  const void* v = nullptr;
  int64_t cap = 0;
  bool ring = false;
  int64_t from = 0, to = 0;  // positions [from, to)
};

// q: bf16 [rows, n_heads, D]; fresh k/v: bf16 [n_fresh, n_kv, D] at positions fresh_pos0...; out: bf16
// [rows, n_heads * D]. Scores and probabilities stay f32 (flash-style online softmax, no [rows, keys] matrix).
Status attention_cuda(const void* q, int64_t rows, int64_t q_pos0, const CachedKv& cached, const void* k_fresh,
                      const void* v_fresh, int64_t n_fresh, int64_t fresh_pos0, const AttnShape& shape, bool causal,
                      int64_t window, void* out, cudaStream_t s);

// Writes bf16 K/V rows [n, n_kv, D] for positions pos0... into an f16 cache layer (ring: slot = pos % cap; a chunk
// longer than the ring keeps its last cap rows).
Status kv_write_cuda(const void* k, const void* v, int64_t n, int64_t row_elems, int64_t pos0, void* cache_k,
                     void* cache_v, int64_t cap, bool ring, cudaStream_t s);
// row_digest (kv_digest.h) of each of `rows` rows of `row_bytes` bytes at `data` into out[rows] (device memory).
Status row_digests_cuda(const void* data, int64_t rows, int64_t row_bytes, uint64_t* out, cudaStream_t s);

}  // namespace dg

namespace dg {

// The tensor-core attention path (the GEMMs run in cuBLAS, driven by the CUDA backend):
// 1. gather the visible keys/values into contiguous bf16 [S, n_kv, D] (cache positions [from, to) from the f16 ring,
//    then the fresh rows), so key j sits at position key_pos0 + j;
Status attention_gather_cuda(const CachedKv& cached, const void* k_fresh, const void* v_fresh, int64_t n_fresh,
                             int64_t row_elems, void* k_out, void* v_out, cudaStream_t s);
// 2. after scores = Q K^T (f32 [heads, rows, S]), a masked row softmax to bf16 probabilities (f32 inside); query r
//    is at position q_pos0 + r; fully masked positions get probability 0;
Status attention_softmax_cuda(const float* scores, int64_t heads, int64_t rows, int64_t S, int64_t q_pos0,
                              int64_t key_pos0, bool causal, int64_t window, void* probs, cudaStream_t s);
// 3. then out = P V per head.

// The fused tensor-core path (attention_flash.cu): Q K^T, the masked online softmax and P V in one kernel, never
// writing a [rows, keys] matrix. Fresh keys/values arrive as f16 (the cache's storage; the caller converts the bf16
// rows, exact for the magnitudes the K/V norms produce); probabilities enter P V as f16. Head dims 16..512 in
// powers of two (attention_flash_supports); anything else is an error naming the gemm kernel. Bidirectional
// (canvas) attention splits the keys over up to max_splits blocks per row tile, as many as fill the GPU's resident
// blocks in one wave (flash-decoding), merging the partial results in f32. A block of 4 warps writes out_cols (128 or
// 256) output columns of its head; larger head dims take several blocks, each recomputing the scores. Head dims of
// pair_min_dim and up (256 and 512; 0: none) run the warp-pair block instead (flash_pair.cuh): 8 warps take every
// column of the head, each pair of warps splitting the score product over the head dims and the output columns.
// wgmma (true; head dims 256 and 512, other head dims ignore it) runs the Hopper blocks instead (products by
// wgmma.mma_async; flash_wgmma.cuh for 256: two warpgroups, K/V tiles shared by the two query heads of a KV head;
// flash_wgmma512.cuh for 512: two warpgroups of one head's 64 rows, each taking half of the head dims and of the
// output columns); without an sm_90a build and a Hopper GPU (attention_flash_wgmma_available) such a call is an
// error, never a silent fallback.
bool attention_flash_supports(int64_t head_dim);
bool attention_flash_pairs(int64_t head_dim, int pair_min_dim);
bool attention_flash_wgmma_available();
// The error of a wgmma call where attention_flash_wgmma_available() is false (ok where it is true); `what` names the
// launcher.
Status attention_flash_wgmma_check(const char* what);
Status attention_flash_cuda(const void* q, int64_t rows, int64_t q_pos0, const CachedKv& cached, const void* k_fresh,
                            const void* v_fresh, int64_t n_fresh, int64_t fresh_pos0, const AttnShape& shape,
                            bool causal, int64_t window, void* out, cudaStream_t s, int max_splits = 16,
                            int out_cols = 256, int pair_min_dim = 0, bool wgmma = false);


// One sequence of attention_flash_segments_cuda: its query rows [row0, row0 + rows) of q and out, which are also
// its fresh K/V rows (at positions pos0..: a batched denoise step's canvas), over the cached positions of `cached`.
struct FlashSegment {
  int64_t row0 = 0, rows = 0, pos0 = 0;
  CachedKv cached;
};
// The flash kernel over several sequences in one launch (varlen): every sequence's query tiles side by side in one
// grid, each block reading its own sequence's cache and fresh rows; no key splits (the grid is the sequences' tiles;
// for a grid short of one wave of resident blocks, attention_flash_cuda per sequence splits its keys instead).
// q: bf16 [total rows, n_heads, D]; k_fresh, v_fresh: f16 [total rows, n_kv, D]; out: bf16 [total rows, n_heads * D].
// Bidirectional within each sequence (causal false) or causal with `window`, as attention_flash_cuda.
Status attention_flash_segments_cuda(const void* q, std::span<const FlashSegment> segs, const void* k_fresh,
                                     const void* v_fresh, const AttnShape& shape, bool causal, int64_t window,
                                     void* out, cudaStream_t s, int out_cols = 256, int pair_min_dim = 0,
                                     bool wgmma = false);
// Whether one launch of attention_flash_segments_cuda fills at least one wave of resident blocks for these
// sequences (else per-sequence calls, which split their keys, keep the GPU busier).
bool attention_flash_segments_fill(std::span<const FlashSegment> segs, const AttnShape& shape, int out_cols = 256,
                                   int pair_min_dim = 0, bool wgmma = false);

}  // namespace dg
#endif
