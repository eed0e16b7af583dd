#include "ops/logits/logits.h"

#include <cmath>

#include "ops/linear/linear.h"

namespace dg {

void lm_head_softcap_cpu(const float* y, int64_t rows, const Tensor& embed, float cap, Storage act, float* out) {
  linear_cpu(y, rows, embed.shape[1], embed, out);
  const int64_t n = rows * embed.shape[0];
  for (int64_t i = 0; i < n; ++i) {
    const float l = round_to(act, out[i]);
    out[i] = cap > 0.0f ? std::tanh(l / cap) * cap : l;
  }
}

}  // namespace dg
