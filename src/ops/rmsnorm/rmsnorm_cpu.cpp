#include "ops/rmsnorm/rmsnorm.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"

namespace dg {

void rmsnorm_cpu(const float* x, int64_t rows, int64_t dim, const Tensor* w, float eps, float* y) {
  std::vector<float> wf;
  if (w != nullptr) {
    DG_CHECK(w->numel() == dim, "rmsnorm: weight has {} elements, rows have {}", w->numel(), dim);
    wf.resize(static_cast<size_t>(dim));
    convert_to_f32(w->data, w->dtype, wf.size(), wf.data());
  }
  parallel_for(rows, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * dim;
      float* yr = y + r * dim;
      double ss = 0.0;
      for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
      const float ms = static_cast<float>(ss / static_cast<double>(dim)) + eps;
      const float inv = std::pow(ms, -0.5f);
      if (w != nullptr) {
        for (int64_t i = 0; i < dim; ++i) yr[i] = (xr[i] * inv) * wf[static_cast<size_t>(i)];
      } else {
        for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * inv;
      }
    }
  });
}

}  // namespace dg
