// Sampler row statistics over the vocabulary, on tempered logits x = raw / T (true f32 division): argmax (lowest
// index on ties), the entropy of softmax(x) in nats, and the probability of the argmax. One pass per row with a
// running max, so no [rows, vocab] probability matrix is kept.
// Reference: torch.distributions.Categorical(logits=x).entropy() and torch.argmax in generation_diffusion_gemma.py.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace dg {

struct RowStats {
  int32_t argmax = 0;
  float entropy = 0.0f;  // nats
  float p_max = 0.0f;
};

// raw: [rows, vocab] f32; writes the tempered logits to `tempered` (may alias raw) when it is not null.
void row_stats_cpu(const float* raw, int64_t rows, int64_t vocab, float temperature, float* tempered, RowStats* out);
// The same with the tempered logits stored as `tempered_dtype` (f32, or bf16 / f16 rounded to nearest even).
void row_stats_cpu(const float* raw, int64_t rows, int64_t vocab, float temperature, void* tempered,
                   DType tempered_dtype, RowStats* out);

// Inverse-CDF draw from softmax(tempered row): the first index whose running f64 sum exceeds u (the last
// index with nonzero probability when rounding leaves u above the total).
int32_t categorical_draw(const float* tempered, int64_t vocab, double u);

}  // namespace dg
