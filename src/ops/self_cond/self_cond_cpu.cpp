#include "ops/self_cond/self_cond.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/parallel.h"
#include "ops/linear/linear.h"
#include "ops/moe/moe.h"

namespace dg {

void soft_embed_cpu(const void* sc_logits, DType sc_dtype, int64_t rows, const Tensor& embed, float scale,
                    Storage act, float sparse_cutoff, float* out) {
  const bool fp8 = embed.dtype == DType::kFp8;  // [hidden, vocab]: the W8A8 product
  const int64_t vocab = embed.shape[fp8 ? 1 : 0], hidden = embed.shape[fp8 ? 0 : 1];
  const size_t esz_sc = dtype_size(sc_dtype);
  // Probabilities per row (f32 softmax, then the activation storage rounding), with survivor lists when sparse.
  std::vector<float> p(static_cast<size_t>(rows * vocab));
  std::vector<std::vector<int32_t>> keep(static_cast<size_t>(rows));
  parallel_for(rows, 1, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(sc_dtype == DType::kF32 ? 0 : static_cast<size_t>(vocab));
    for (int64_t r = r0; r < r1; ++r) {
      const void* src = static_cast<const uint8_t*>(sc_logits) + static_cast<size_t>(r * vocab) * esz_sc;
      const float* x = static_cast<const float*>(src);
      if (sc_dtype != DType::kF32) {
        convert_to_f32(src, sc_dtype, static_cast<size_t>(vocab), row.data());
        x = row.data();
      }
      float* pr = p.data() + r * vocab;
      const float mx = *std::max_element(x, x + vocab);
      double sum = 0.0;
      for (int64_t v = 0; v < vocab; ++v) sum += pr[v] = std::exp(x[v] - mx);
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t v = 0; v < vocab; ++v) pr[v] = round_to(act, pr[v] * inv);
      const float floor = sparse_cutoff > 0.0f ? sparse_cutoff * inv : 0.0f;  // p_max = 1 / sum
      if (fp8) {  // the dense product below: the tokens under the cutoff zeroed, as the GPU's probability pass does
        for (int64_t v = 0; v < vocab; ++v)
          if (pr[v] < floor) pr[v] = 0.0f;
        continue;
      }
      auto& k = keep[static_cast<size_t>(r)];
      for (int64_t v = 0; v < vocab; ++v)
        if (pr[v] != 0.0f && pr[v] >= floor) k.push_back(static_cast<int32_t>(v));
    }
  });
  if (fp8) {  // the rows of p quantised to E4M3 (zeros stay zero), then the product with the fp8 transpose
    act_quant_fp8_rows(p.data(), rows, vocab);
    linear_cpu(p.data(), rows, vocab, embed, out);
    for (int64_t i = 0; i < rows * hidden; ++i) out[i] = round_to(act, round_to(act, out[i]) * scale);
    return;
  }
  // out[r, c] = sum_v p[r, v] E[v, c], in vocabulary order, parallel over column blocks (deterministic).
  constexpr int64_t kCols = 64;
  const size_t esz = dtype_size(embed.dtype);
  parallel_for((hidden + kCols - 1) / kCols, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> erow(static_cast<size_t>(kCols));
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t c0 = b * kCols, nc = std::min(kCols, hidden - c0);
      std::vector<float> acc(static_cast<size_t>(rows * nc), 0.0f);
      for (int64_t r = 0; r < rows; ++r) {
        float* a = acc.data() + r * nc;
        for (int32_t v : keep[static_cast<size_t>(r)]) {
          convert_to_f32(static_cast<const uint8_t*>(embed.data) + (static_cast<size_t>(v) * hidden + c0) * esz,
                         embed.dtype, static_cast<size_t>(nc), erow.data());
          const float pv = p[static_cast<size_t>(r * vocab + v)];
          for (int64_t c = 0; c < nc; ++c) a[c] += pv * erow[static_cast<size_t>(c)];
        }
        for (int64_t c = 0; c < nc; ++c) out[r * hidden + c0 + c] = round_to(act, round_to(act, a[c]) * scale);
      }
    }
  });
}

}  // namespace dg
