// Rotary position embedding, "rotate-half" over the whole head: for d < D/2,
//   out[d] = x[d]*cos[d] - x[d+D/2]*sin[d],  out[d+D/2] = x[d+D/2]*cos[d] + x[d]*sin[d].
// Angles pos*inv_freq are f32; cos/sin are rounded to the activation storage before use, and each product and
// the sum are rounded to it too (the reference's op-by-op rounding in a bf16 model). Full layers pass an
// inv_freq with zeros above the rotated pairs ("proportional" RoPE), which leaves those dims unchanged.
// Reference: DiffusionGemmaTextRotaryEmbedding.forward and apply_rotary_pos_emb.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace dg {

// Rows [row0, row0 + rows) of a tensor rotated at positions pos0 + (row - row0): one sequence of a batched step
// (Backend::rope_spans).
struct RopeSpan {
  int64_t row0 = 0, rows = 0, pos0 = 0;
};

// x: [rows, heads, head_dim] f32, rotated in place; pos: [rows] absolute positions; inv_freq: [head_dim/2].
void rope_cpu(float* x, int64_t rows, int64_t heads, int64_t head_dim, const int64_t* pos, const float* inv_freq,
              Storage act);

}  // namespace dg
