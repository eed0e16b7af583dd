#include "support/compare.h"

#include <cmath>

#include <fmt/format.h>

namespace dg::test {

std::string Diff::str() const {
  return fmt::format("max_abs={:.3e} (at {}) max_rel={:.3e} cosine={:.9f} first_bad={} finite={}", max_abs, worst,
                     max_rel, cosine, first_bad, finite);
}

Diff compare(std::span<const float> got, std::span<const float> want, double abs_tol) {
  Diff d;
  if (got.size() != want.size()) {
    d.finite = false;
    d.max_abs = INFINITY;
    return d;
  }
  double dot = 0, ng = 0, nw = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (!std::isfinite(g) || !std::isfinite(w)) d.finite = false;
    const double e = std::fabs(g - w);
    if (e > d.max_abs) {
      d.max_abs = e;
      d.worst = static_cast<int64_t>(i);
    }
    d.max_rel = std::max(d.max_rel, e / std::max(1e-6, std::fabs(w)));
    if (abs_tol >= 0 && e > abs_tol && d.first_bad < 0) d.first_bad = static_cast<int64_t>(i);
    dot += g * w;
    ng += g * g;
    nw += w * w;
  }
  d.cosine = (ng == 0 && nw == 0) ? 1.0 : dot / std::sqrt(ng * nw + 1e-300);
  return d;
}

}  // namespace dg::test
