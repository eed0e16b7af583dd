#include "ops/conformance/verdict.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include <fmt/format.h>

#include "support/compare.h"

namespace dg::test {

Verdict judge(const Output& got, const Output& want, const Bound& b) {
  Verdict v;
  if (got.ints.size() != want.ints.size() || got.values.size() != want.values.size()) {
    return {false, fmt::format("{}: {} values and {} ints against the twin's {} and {}", want.name, got.values.size(),
                               got.ints.size(), want.values.size(), want.ints.size())};
  }
  for (size_t i = 0; i < want.ints.size(); ++i)
    if (got.ints[i] != want.ints[i])
      return {false, fmt::format("{}: integer {} is {}, the twin's {}", want.name, i, got.ints[i], want.ints[i])};
  if (want.values.empty()) return {true, fmt::format("{}: {} integers equal", want.name, want.ints.size())};
  const Diff d = compare(got.values, want.values);
  double peak = 0;
  for (float w : want.values) peak = std::max(peak, static_cast<double>(std::fabs(w)));
  const bool sums = !want.abs_sum.empty() && b.rel_sum > 0;
  double worst = 0;
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < want.values.size(); ++i) {
    const double g = got.values[i], w = want.values[i];
    const double tol = b.exact ? 0.0
                               : b.abs + b.rel * std::fabs(w) + (sums ? b.rel_sum * want.abs_sum[i] : 0.0) +
                                     b.of_peak * peak;
    const double e = std::fabs(g - w);
    const bool within = b.exact ? std::bit_cast<uint32_t>(got.values[i]) == std::bit_cast<uint32_t>(want.values[i])
                                : e <= tol;  // NaN fails
    if (!within && bad++ == 0) first = static_cast<int64_t>(i);
    if (tol > 0) worst = std::max(worst, e / tol);
  }
  v.ok = d.finite && bad == 0 && (b.min_cosine <= 0 || d.cosine >= b.min_cosine);
  v.line = fmt::format("{}: {}; worst/bound {:.3g}{}", want.name, d.str(), worst,
                       bad > 0 ? fmt::format(", {} outside the bound, first at {} (got {} want {})", bad, first,
                                             got.values[static_cast<size_t>(first)],
                                             want.values[static_cast<size_t>(first)])
                               : "");
  if (b.min_cosine > 0 && d.cosine < b.min_cosine) v.line += fmt::format(", cosine below {}", b.min_cosine);
  return v;
}

Verdict same_bits(const Output& a, const Output& b) {
  if (a.ints != b.ints || a.values.size() != b.values.size())
    return {false, fmt::format("{}: a second run differs", a.name)};
  for (size_t i = 0; i < a.values.size(); ++i)
    if (std::bit_cast<uint32_t>(a.values[i]) != std::bit_cast<uint32_t>(b.values[i]))
      return {false, fmt::format("{}: a second run differs at {} ({} then {})", a.name, i, a.values[i], b.values[i])};
  return {true, ""};
}

}  // namespace dg::test
