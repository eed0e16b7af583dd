// For the byte grammars' tests (JSON schema, strict tool calls): a shortest completion found greedily, to check that
// closing_bytes() is exact.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dg::test {

// From `g`, bytes that each lower closing_bytes() by one, each the first of `candidates` that does; the completion,
// or "" when none exists (or it does not leave the grammar complete).
template <class Grammar>
std::string close_greedily(Grammar g, const std::vector<uint8_t>& candidates) {
  std::string out;
  for (int d = g.closing_bytes(); d > 0; d = g.closing_bytes()) {
    bool moved = false;
    for (size_t i = 0; i < candidates.size() && !moved; ++i) {
      Grammar n = g;
      if (n.feed(candidates[i]) && n.closing_bytes() == d - 1) {
        g = n;
        out += static_cast<char>(candidates[i]);
        moved = true;
      }
    }
    if (!moved) return "";
  }
  return g.complete() ? out : "";
}

// The bytes from `lo` to `hi`, both included, in order.
inline std::vector<uint8_t> byte_range(int lo, int hi) {
  std::vector<uint8_t> out;
  for (int c = lo; c <= hi; ++c) out.push_back(static_cast<uint8_t>(c));
  return out;
}

}  // namespace dg::test
