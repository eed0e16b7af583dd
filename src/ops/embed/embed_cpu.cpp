#include "ops/embed/embed.h"

#include <cmath>

#include "core/error.h"

namespace dg {

float embed_scale(int64_t hidden, Storage act) {
  return round_to(act, static_cast<float>(std::sqrt(static_cast<double>(hidden))));
}

void embed_cpu(const int32_t* ids, int64_t rows, const Tensor& table, float scale, Storage act, float* out) {
  const int64_t vocab = table.shape[0], hidden = table.shape[1];
  const size_t esz = dtype_size(table.dtype);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t id = ids[r];
    DG_CHECK(id >= 0 && id < vocab, "token id {} at position {} is outside the vocabulary [0, {})", id, r, vocab);
    float* o = out + r * hidden;
    convert_to_f32(static_cast<const uint8_t*>(table.data) + static_cast<size_t>(id * hidden) * esz, table.dtype,
                   static_cast<size_t>(hidden), o);
    for (int64_t c = 0; c < hidden; ++c) o[c] = round_to(act, o[c] * scale);
  }
}

}  // namespace dg
