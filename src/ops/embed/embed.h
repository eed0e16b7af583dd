// Token embedding: out[r] = table[ids[r]] * scale, the product rounded to the activation storage. The scale is
// sqrt(hidden) converted to the activation dtype first (bf16(sqrt(2816)) = 53.0 in a bf16 model; SPEC.md §2.2).
// Reference: DiffusionGemmaTextScaledWordEmbedding.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/tensor.h"

namespace dg {

float embed_scale(int64_t hidden, Storage act);

// ids: [rows]; table: [vocab, hidden]; out: [rows, hidden]. Throws dg::Error on an id outside the vocabulary.
void embed_cpu(const int32_t* ids, int64_t rows, const Tensor& table, float scale, Storage act, float* out);

}  // namespace dg
