// The registry of op cases: one line per op folder.
#include "ops/op_cases.h"

#include <fmt/format.h>

#include "core/error.h"

namespace dg {

int64_t CaseParams::n(const std::string& key) const { return static_cast<int64_t>(f(key)); }

double CaseParams::f(const std::string& key) const {
  const auto it = p_.find(key);
  DG_CHECK(it != p_.end(), "op case parameter '{}' is missing ({})", key, str());
  return it->second;
}

std::string CaseParams::str() const {
  std::string s;
  for (const auto& [k, v] : p_) s += fmt::format("{}{}={}", s.empty() ? "" : " ", k, v);
  return s;
}

const Bound* OpCase::bound(const std::string& backend, const std::string& output) const {
  const Bound* all = nullptr;
  for (const CaseBound& b : bounds) {
    if (b.backend != backend) continue;
    if (b.output == output) return &b.bound;
    if (b.output.empty() && all == nullptr) all = &b.bound;
  }
  return all;
}

std::vector<OpCase> all_op_cases() {
  std::vector<OpCase> all;
  for (auto* cases : {attention_cases, decide_cases, elementwise_cases, embed_cases, glu_cases, linear_cases,
                      logits_cases, moe_cases, residual_cases, rmsnorm_cases, rope_cases, row_stats_cases,
                      self_cond_cases}) {
    std::vector<OpCase> c = cases();
    all.insert(all.end(), std::make_move_iterator(c.begin()), std::make_move_iterator(c.end()));
  }
  return all;
}

}  // namespace dg
