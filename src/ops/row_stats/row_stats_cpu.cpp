#include "ops/row_stats/row_stats.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/parallel.h"

namespace dg {

void row_stats_cpu(const float* raw, int64_t rows, int64_t vocab, float temperature, float* tempered, RowStats* out) {
  row_stats_cpu(raw, rows, vocab, temperature, tempered, DType::kF32, out);
}

void row_stats_cpu(const float* raw, int64_t rows, int64_t vocab, float temperature, void* tempered,
                   DType tempered_dtype, RowStats* out) {
  DG_CHECK(tempered == nullptr || tempered_dtype == DType::kF32 || tempered_dtype == DType::kBF16 ||
               tempered_dtype == DType::kF16,
           "row_stats: tempered logits cannot be stored as {}", dtype_name(tempered_dtype));
  parallel_for(rows, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* x = raw + r * vocab;
      const size_t at = static_cast<size_t>(r * vocab);
      float* t32 = tempered != nullptr && tempered_dtype == DType::kF32 ? static_cast<float*>(tempered) + at : nullptr;
      uint16_t* t16 = tempered != nullptr && tempered_dtype != DType::kF32 ? static_cast<uint16_t*>(tempered) + at
                                                                            : nullptr;
      const bool bf16 = tempered_dtype == DType::kBF16;
      float mx = -INFINITY;
      int32_t am = 0;
      for (int64_t v = 0; v < vocab; ++v) {
        const float y = x[v] / temperature;
        if (t32 != nullptr) t32[v] = y;
        if (t16 != nullptr) t16[v] = bf16 ? f32_to_bf16(y) : f32_to_f16(y);
        if (y > mx) {
          mx = y;
          am = static_cast<int32_t>(v);
        }
      }
      double s = 0.0, sx = 0.0;
      for (int64_t v = 0; v < vocab; ++v) {
        const double y = static_cast<double>(x[v] / temperature) - mx;
        const double e = std::exp(y);
        s += e;
        if (e != 0.0) sx += e * y;  // a masked (-inf) entry weighs nothing: 0 * -inf would poison the row
      }
      // H = log(sum e^(y-m)) - sum (y-m) e^(y-m) / sum e^(y-m)
      out[r].argmax = am;
      out[r].entropy = static_cast<float>(std::log(s) - sx / s);
      out[r].p_max = static_cast<float>(1.0 / s);
    }
  });
}

int32_t categorical_draw(const float* tempered, int64_t vocab, double u) {
  float mx = tempered[0];
  for (int64_t v = 1; v < vocab; ++v) mx = std::max(mx, tempered[v]);
  double sum = 0.0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(tempered[v] - mx));
  double acc = 0.0;
  int32_t last_positive = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    const double p = std::exp(static_cast<double>(tempered[v] - mx)) / sum;
    if (p > 0.0) last_positive = static_cast<int32_t>(v);
    acc += p;
    if (u < acc) return static_cast<int32_t>(v);
  }
  return last_positive;
}

}  // namespace dg
