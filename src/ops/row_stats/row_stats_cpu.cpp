#include "ops/row_stats/row_stats.h"

#include <algorithm>
#include <cmath>

#include "core/parallel.h"

namespace dg {

void row_stats_cpu(const float* raw, int64_t rows, int64_t vocab, float temperature, float* tempered, RowStats* out) {
  parallel_for(rows, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* x = raw + r * vocab;
      float* t = tempered != nullptr ? tempered + r * vocab : nullptr;
      float mx = -INFINITY;
      int32_t am = 0;
      for (int64_t v = 0; v < vocab; ++v) {
        const float y = x[v] / temperature;
        if (t != nullptr) t[v] = y;
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
        sx += e * y;
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
