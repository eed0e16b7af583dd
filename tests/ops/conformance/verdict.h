// How the conformance harness judges one output of a case against the twin's under a Bound (src/ops/op_cases.h),
// and what it prints: the worst element against its bound, max_abs, max_rel, cosine, the first bad index.
#pragma once

#include <string>

#include "ops/conformance/runner.h"

namespace dg::test {

struct Verdict {
  bool ok = true;
  std::string line;  // "out: max_abs=... cosine=... worst/bound=0.12"
};

// got against want (the twin's; its abs_sum feeds rel_sum). Integers must be equal; values must be finite on both
// sides and within the bound element by element, and the cosine at least the bound's.
Verdict judge(const Output& got, const Output& want, const Bound& b);
// Bit-identical outputs (the same backend run twice).
Verdict same_bits(const Output& a, const Output& b);

}  // namespace dg::test
