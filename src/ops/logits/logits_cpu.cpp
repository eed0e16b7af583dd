#include "ops/logits/logits.h"

#include <cmath>
#include <vector>

#include "ops/linear/linear.h"
#include "ops/moe/moe.h"

namespace dg {

void lm_head_softcap_cpu(const float* y, int64_t rows, const Tensor& embed, float cap, Storage act, float* out) {
  std::vector<float> yq;
  if (embed.dtype == DType::kFp8) {  // W8A8: the rows replaced by their per-row E4M3 values
    yq.assign(y, y + rows * embed.shape[1]);
    act_quant_fp8_rows(yq.data(), rows, embed.shape[1]);
    y = yq.data();
  }
  linear_cpu(y, rows, embed.shape[1], embed, out);
  const int64_t n = rows * embed.shape[0];
  for (int64_t i = 0; i < n; ++i) {
    const float l = round_to(act, out[i]);
    out[i] = cap > 0.0f ? std::tanh(l / cap) * cap : l;
  }
}

}  // namespace dg
