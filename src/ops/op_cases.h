// Op conformance cases: for each op of src/ops, the shapes that matter (the fixtures', odd ones that show indexing,
// the 26B-A4B shapes), the weight formats, and per backend the bound its output keeps against the CPU twin, with
// the measurement behind the bound. Data only (each op folder's <op>_cases.cpp): tests/ops/conformance runs every
// case on every backend that is built and present; a case without a measured bound fails on that backend
// (docs/ARCHITECTURE.md, "Add an op"; the bounds and their numbers: docs/NUMERICS.md, "Op conformance").
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace dg {

// How far a backend's output may sit from the CPU twin's, element by element (want: the twin's value; S: the sum of
// |products| behind the element where the op is a product, else 0; peak: the largest |want| of the output):
//   |got - want| <= abs + rel |want| + rel_sum S + of_peak peak,  and the output's cosine >= min_cosine.
struct Bound {
  double abs = 0, rel = 0, rel_sum = 0, of_peak = 0;
  double min_cosine = 0;  // 0: not checked
  bool exact = false;     // bit-identical values (ids, decisions, and arithmetic both sides do alike)
  const char* basis = nullptr;     // the arithmetic that separates the two sides
  // The measurement behind the bound: test, device, date and the worst values seen (docs/NUMERICS.md). Null: none
  // yet, and the case fails on that backend after printing what it measured.
  const char* measured = nullptr;
  // Set where the backend refuses the case by design (why): the harness checks the refusal instead.
  const char* refused = nullptr;
};

// A bound for one backend ("cuda"), for every output of a case ("") or one named output.
struct CaseBound {
  std::string backend, output;
  Bound bound;
};

// An op's parameters by name (shapes, positions, scalars); what each means is written in the op's cases file.
class CaseParams {
 public:
  CaseParams() = default;
  CaseParams(std::initializer_list<std::pair<const std::string, double>> p) : p_(p) {}
  int64_t n(const std::string& key) const;  // throws dg::Error naming a missing key
  double f(const std::string& key) const;
  bool has(const std::string& key) const { return p_.count(key) != 0; }
  std::string str() const;  // "rows=256 dim=2816"

 private:
  std::map<std::string, double> p_;
};

struct OpCase {
  std::string folder;  // src/ops/<folder>
  std::string op;      // the Backend op it calls ("rmsnorm_rope", "linears", ...)
  std::string name;
  CaseParams p;
  DType weights = DType::kBF16;  // the weight format of products (linear, moe)
  // A 26B-A4B shape: device backends run it, the CPU reference's own run leaves it out (CI runs it under ASan on
  // two cores).
  bool real = false;
  // The twin computes in f32 with an f32 KV cache (the measured comparison of attention: inputs representable in
  // both storages, the output unrounded); otherwise it stores what the backend under test stores.
  bool twin_f32 = false;
  std::vector<CaseBound> bounds;

  // The bound of `backend` for `output` (an entry for the output before one for all); null: none.
  const Bound* bound(const std::string& backend, const std::string& output) const;
  std::string id() const { return folder + "/" + op + "/" + name; }
};

// The cases of each op folder (src/ops/<folder>/<folder>_cases.cpp).
std::vector<OpCase> attention_cases();
std::vector<OpCase> decide_cases();
std::vector<OpCase> elementwise_cases();
std::vector<OpCase> embed_cases();
std::vector<OpCase> glu_cases();
std::vector<OpCase> linear_cases();
std::vector<OpCase> logits_cases();
std::vector<OpCase> moe_cases();
std::vector<OpCase> residual_cases();
std::vector<OpCase> rmsnorm_cases();
std::vector<OpCase> rope_cases();
std::vector<OpCase> row_stats_cases();
std::vector<OpCase> self_cond_cases();

// Every op folder's cases, in folder order.
std::vector<OpCase> all_op_cases();

}  // namespace dg
