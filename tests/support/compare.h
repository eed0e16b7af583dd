// Numerical comparison for tests: max |a-b|, max relative error, cosine and the first index over a bound, with
// finiteness checked on both sides. Failure messages print all of them.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace dg::test {

struct Diff {
  double max_abs = 0, max_rel = 0, cosine = 1;
  int64_t worst = -1;       // index of max_abs
  int64_t first_bad = -1;   // first index with |a-b| > abs_tol (when a tolerance was given)
  bool finite = true;
  std::string str() const;
};

Diff compare(std::span<const float> got, std::span<const float> want, double abs_tol = -1);

}  // namespace dg::test
