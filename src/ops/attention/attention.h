// Scaled-dot-product attention with scale 1.0 (Gemma's QK-norm replaces 1/sqrt(D)), GQA (query head h reads KV
// head h / (n_heads / n_kv_heads)), f32 softmax, probabilities rounded to the activation storage before P*V (eager
// attention casts them back to the query dtype). Keys are a cached span plus freshly computed rows.
// Visibility: causal (key pos <= query pos, and > query pos - window when window > 0) or bidirectional.
// Reference: eager_attention_forward + the masks of SPEC.md §2.8.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace dg {

struct AttnKeys {
  const float* k = nullptr;  // [count, n_kv, head_dim] in position order
  const float* v = nullptr;
  int64_t first_pos = 0;     // position of row 0
  int64_t count = 0;
};

struct AttnShape {
  int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
};

// q: [rows, n_heads, head_dim] at positions q_pos0 + r. Keys: `cached` then `fresh` (either may be empty).
// out: [rows, n_heads * head_dim].
void attention_cpu(const float* q, int64_t rows, int64_t q_pos0, const AttnKeys& cached, const AttnKeys& fresh,
                   const AttnShape& shape, bool causal, int64_t window, Storage act, float* out);

// A host cache layer of `cap` slots of `row` f32 values (ring: position p in slot p % cap, else slot p).
// kv_write_cpu stores rows [n, row] for positions pos0... rounded through `storage` (a chunk longer than a ring
// keeps its last cap rows); kv_read_cpu copies positions [pos0, pos0 + n) out in position order.
void kv_write_cpu(const float* k, const float* v, int64_t n, int64_t row, int64_t pos0, float* cache_k,
                  float* cache_v, int64_t cap, bool ring, Storage storage);
void kv_read_cpu(const float* cache_k, const float* cache_v, int64_t row, int64_t cap, bool ring, int64_t pos0,
                 int64_t n, float* k, float* v);

}  // namespace dg

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

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

}  // namespace dg
#endif

#if defined(DG_WITH_CUDA)
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
// (canvas) attention splits the keys over up to max_splits blocks per row tile when the grid would not fill the
// GPU (flash-decoding), merging the partial results in f32. A block writes out_cols (128 or 256) output columns of
// its head; larger head dims take several blocks, each recomputing the scores.
bool attention_flash_supports(int64_t head_dim);
Status attention_flash_cuda(const void* q, int64_t rows, int64_t q_pos0, const CachedKv& cached, const void* k_fresh,
                            const void* v_fresh, int64_t n_fresh, int64_t fresh_pos0, const AttnShape& shape,
                            bool causal, int64_t window, void* out, cudaStream_t s, int max_splits = 16,
                            int out_cols = 256);

}  // namespace dg
#endif
