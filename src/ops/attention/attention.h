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
