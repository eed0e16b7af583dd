// The op conformance test (after ggml's test-backend-ops): every case of every op folder (src/ops/*/*_cases.cpp)
// runs on every backend of the registry that is built and present, against the CPU twin: the CPU reference storing
// what the tested backend stores (a fused op's twin is the composition of the unfused ones). Each output is held to
// the case's bound for that backend, and a bound without the measurement behind it fails after printing what was
// measured. Every backend also runs each case twice and must give the same bits. The CPU reference's own run (its
// twin is itself: bit-identical) leaves out the 26B-A4B shapes; device backends run them all. Bounds and their
// measurements: docs/NUMERICS.md, "Op conformance". Its tests differ in a build with DG_WITH_CUDA (the cuda backend's
// cases run where a GPU is present), so this file builds into dg_cuda_tests (tests/CMakeLists.txt), which the GPU
// machine's scripts run with the filter *Cuda*.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include "backend/registry.h"
#include "core/error.h"
#include "ops/conformance/runner.h"
#include "ops/conformance/verdict.h"
#include "support/paths.h"

namespace dg::test {
namespace conformance_test {

constexpr const char* kReference = "cpu";
constexpr Bound kSelf{.exact = true, .basis = "the CPU reference against its own composition: the same arithmetic",
                      .measured = "every run of this test"};

struct Param {
  std::string backend, op;
};
void PrintTo(const Param& p, std::ostream* os) { *os << p.backend << " " << p.op; }

std::vector<Param> params() {
  std::vector<Param> p;
  for (const BackendEntry& e : backend_registry())
    for (const std::string& op : runner_ops()) p.push_back({e.name, op});
  return p;
}

// How a case's fp8 linears run: with fp8 activations (its "act8" parameter: BackendOptions::linear_act8), and their
// scales applied by the reading kernel ("on_load": CudaKernels::a8_scales_on_load; the CPU has one W8A8 path).
struct A8 {
  bool act8 = false, on_load = false;
};
A8 a8_of(const OpCase& c) {
  return {c.p.has("act8") && c.p.n("act8") != 0, c.p.has("on_load") && c.p.n("on_load") != 0};
}

// Backends live for the process (a GPU backend is slow to start): the CPU ones by precision, each by its A8.
Backend& backend(const std::string& name, const Precision& p, A8 a8) {
  static std::map<std::string, std::unique_ptr<Backend>> made;
  const std::string key =
      (name == kReference ? fmt::format("cpu/{}/{}", storage_name(p.act), storage_name(p.kv)) : name) +
      (a8.act8 ? "/act8" : "") + (a8.on_load ? "/on_load" : "");
  auto& be = made[key];
  if (!be) {
    BackendOptions o{name == kReference ? p : Precision{}};
    o.linear_act8 = a8.act8;
    o.cuda.a8_scales_on_load = a8.on_load;
    be = make_backend(name, o);
  }
  return *be;
}

Precision twin_precision(const OpCase& c, const Precision& tested) {
  return c.twin_f32 ? Precision{} : tested;
}

// Runs one case on `name` and its twin; adds a failure for each output outside its bound.
void run_case(const OpCase& c, const std::string& name) {
  SCOPED_TRACE(name + " " + c.id() + " (" + c.p.str() + ")");
  const bool reference = name == kReference;
  const Precision gpu_like{Storage::kBF16, Storage::kF16};
  const A8 a8 = a8_of(c), twin_a8{a8.act8, false};
  Backend& cpu_like = backend(kReference, twin_precision(c, gpu_like), twin_a8);
  Backend& tested = reference ? cpu_like : backend(name, {}, a8);
  Backend& twin = backend(kReference, twin_precision(c, tested.precision()), twin_a8);
  const Side t{tested, false, tested.precision().act}, w{twin, true, tested.precision().act};
  const OpRunner run = op_runner(c.op);
  const Bound* all = reference ? &kSelf : c.bound(name, "");
  if (all != nullptr && all->refused != nullptr) {
    try {
      run(c, t);
      ADD_FAILURE() << "the " << name << " backend was expected to refuse this case (" << all->refused << ")";
    } catch (const Error& e) {
      std::cout << "  " << name << " " << c.id() << ": refused as expected: " << e.what() << "\n";
    }
    return;
  }
  std::vector<Output> want, got, again;
  try {
    want = run(c, w);
    got = run(c, t);
    again = run(c, t);
  } catch (const Error& e) {
    ADD_FAILURE() << "the case failed to run: " << e.what();
    return;
  }
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const Bound* b = reference ? &kSelf : c.bound(name, want[i].name);
    if (b == nullptr) {
      ADD_FAILURE() << "no " << name << " bound for output '" << want[i].name << "'";
      continue;
    }
    double peak = 0;
    for (float x : want[i].values) peak = std::max(peak, static_cast<double>(std::fabs(x)));
    EXPECT_TRUE(want[i].values.empty() || peak > 0) << "'" << want[i].name << "' is all zeros: the case shows nothing";
    const Verdict v = judge(got[i], want[i], *b);
    std::cout << "  " << name << " " << c.id() << " " << v.line << "\n";
    EXPECT_TRUE(v.ok) << v.line << "\n  bound basis: " << (b->basis ? b->basis : "(none)");
    if (b->measured == nullptr)
      ADD_FAILURE() << "no measured " << name << " bound for " << c.id() << " '" << want[i].name
                    << "': record the numbers above in docs/NUMERICS.md (\"Op conformance\") and cite them in "
                    << "src/ops/" << c.folder << "/" << c.folder << "_cases.cpp";
    const Verdict same = same_bits(got[i], again[i]);
    EXPECT_TRUE(same.ok) << same.line;
  }
}

class OpConformance : public ::testing::TestWithParam<Param> {};

TEST_P(OpConformance, EveryCaseMatchesTheCpuTwin) {
  const Param& p = GetParam();
  const BackendEntry& e = backend_entry(p.backend);
  if (e.make == nullptr) GTEST_SKIP() << e.missing;
  if (!e.present()) GTEST_SKIP() << "no " << p.backend << " device: its cases run on a machine that has one";
  int ran = 0;
  for (const OpCase& c : all_op_cases()) {
    if (c.op != p.op || (p.backend == kReference && c.real)) continue;
    run_case(c, p.backend);
    ++ran;
  }
  EXPECT_GT(ran, 0) << "no cases of " << p.op;
}

// Named Cpu_<op>, Cuda_<op>: the GPU machine's scripts select the CUDA tests with the filter *Cuda*.
std::string param_name(const ::testing::TestParamInfo<Param>& i) {
  std::string b = i.param.backend;
  if (!b.empty()) b[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(b[0])));
  return b + "_" + i.param.op;
}

INSTANTIATE_TEST_SUITE_P(Backends, OpConformance, ::testing::ValuesIn(params()), param_name);

TEST(OpCases, EveryOpFolderHasItsCases) {
  const std::vector<OpCase> cases = all_op_cases();
  int folders = 0;
  for (const auto& d : std::filesystem::directory_iterator(source_path("src/ops"))) {
    if (!d.is_directory()) continue;
    const std::string f = d.path().filename().string();
    ++folders;
    EXPECT_TRUE(std::filesystem::exists(d.path() / (f + "_cases.cpp"))) << "src/ops/" << f << " has no " << f
                                                                          << "_cases.cpp";
    const auto n = std::count_if(cases.begin(), cases.end(), [&](const OpCase& c) { return c.folder == f; });
    EXPECT_GT(n, 0) << "no registered cases of src/ops/" << f << " (all_op_cases, src/ops/op_cases.cpp)";
  }
  EXPECT_GE(folders, 13);
}

TEST(OpCases, EveryCaseHasARunnerAndABoundForEveryOtherBackend) {
  std::set<std::string> ids;
  for (const OpCase& c : all_op_cases()) {
    EXPECT_TRUE(ids.insert(c.id()).second) << "two cases named " << c.id();
    EXPECT_NE(op_runner(c.op), nullptr) << c.id() << ": no runner for op " << c.op << " (tests/ops/conformance)";
    for (const BackendEntry& e : backend_registry()) {
      if (std::string(e.name) == kReference) continue;
      int bounds = 0;
      for (const CaseBound& b : c.bounds) {
        if (b.backend != e.name) continue;
        ++bounds;
        EXPECT_TRUE(b.bound.basis != nullptr || b.bound.refused != nullptr) << c.id() << ": a bound without its basis";
      }
      EXPECT_GT(bounds, 0) << c.id() << ": no bound for the " << e.name << " backend";
    }
  }
}

TEST(OpCases, EveryBackendOpHasCases) {
  const std::vector<OpCase> cases = all_op_cases();
  for (const std::string& op : runner_ops())
    EXPECT_TRUE(std::any_of(cases.begin(), cases.end(), [&](const OpCase& c) { return c.op == op; }))
        << "no cases of the Backend op " << op;
}

// The judge itself: what it must reject.
TEST(OpCases, TheJudgeRejectsWhatABoundExcludes) {
  const Output want{"out", {1.0f, -2.0f, 4.0f}, {}, {10.0f, 10.0f, 10.0f}};
  auto with = [&](std::vector<float> v) { return Output{"out", std::move(v), {}, {}}; };
  const Bound rel{.rel = 0x1p-8, .min_cosine = 0.999};
  EXPECT_TRUE(judge(with({1.0f, -2.0f, 4.0f}), want, rel).ok);
  EXPECT_TRUE(judge(with({1.003f, -2.0f, 4.0f}), want, rel).ok);
  EXPECT_FALSE(judge(with({1.01f, -2.0f, 4.0f}), want, rel).ok);
  EXPECT_FALSE(judge(with({1.0f, -2.0f, NAN}), want, rel).ok);
  const Bound sums{.rel_sum = 1e-3};
  EXPECT_TRUE(judge(with({1.009f, -2.0f, 4.0f}), want, sums).ok);  // 1e-3 * 10
  EXPECT_FALSE(judge(with({1.02f, -2.0f, 4.0f}), want, sums).ok);
  const Bound peak{.of_peak = 0x1p-5};  // 4 * 2^-5 = 0.125
  EXPECT_TRUE(judge(with({1.1f, -2.1f, 4.1f}), want, peak).ok);
  EXPECT_FALSE(judge(with({1.2f, -2.0f, 4.0f}), want, peak).ok);
  const Bound cosine{.abs = 100, .min_cosine = 0.999};
  EXPECT_FALSE(judge(with({-1.0f, 2.0f, -4.0f}), want, cosine).ok);
  const Bound exact{.exact = true};
  EXPECT_FALSE(judge(with({1.0f, -2.0f, std::nextafter(4.0f, 5.0f)}), want, exact).ok);
  EXPECT_FALSE(judge(Output{"ids", {}, {1, 2}, {}}, Output{"ids", {}, {1, 3}, {}}, exact).ok);
  EXPECT_FALSE(same_bits(with({0.0f}), with({-0.0f})).ok);
}

}  // namespace conformance_test
}  // namespace dg::test
