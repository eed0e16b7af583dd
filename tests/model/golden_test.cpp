// The golden gate (engine/golden.h): the production chat paths on the embedded model, pinned by token ids and KV
// fingerprints in tests/fixtures/golden/cpu.json (re-blessed by `diffgemma golden -m models/dg-tiny --bless`). A refactor that moves
// one byte fails here and names the case and checkpoint.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "engine/golden.h"
#include "support/embedded_engine.h"
#include "support/paths.h"

namespace dg::test {
namespace golden_test {

Json blessed() {
  std::ifstream in(source_path(golden_file("cpu", "cpu")));
  std::stringstream ss;
  ss << in.rdbuf();
  return Json::parse(ss.str());
}

TEST(Golden, TheProductionPathsAreByteIdentical) {
  const Json got = run_golden(embedded_engine());
  const Json want = blessed();
  EXPECT_EQ(got["cases"].size(), golden_case_names().size());
  const std::vector<std::string> diffs = compare_golden(got, want);
  EXPECT_TRUE(diffs.empty()) << fmt::format("{}", fmt::join(diffs, "\n"))
                             << "\n(a deliberate change: `diffgemma golden -m models/dg-tiny --bless` in the source tree)";
}

// The CPU reference keeps one file; a GPU backend one per card model, named from the device's name.
TEST(Golden, EachCardModelHasItsOwnFile) {
  EXPECT_EQ(golden_file("cpu", "cpu"), "tests/fixtures/golden/cpu.json");
  EXPECT_EQ(golden_file("cuda", "NVIDIA H200"), "tests/fixtures/golden/cuda-nvidia-h200.json");
  EXPECT_EQ(golden_file("cuda", "NVIDIA H100 80GB HBM3"), "tests/fixtures/golden/cuda-nvidia-h100-80gb-hbm3.json");
  EXPECT_EQ(golden_file("cuda", " NVIDIA  A100-SXM4-40GB (MIG) "),
            "tests/fixtures/golden/cuda-nvidia-a100-sxm4-40gb-mig.json");
}

// The sanitizer run's share of the gate (the whole matrix is plain_only, docs/CI.md): one case, the tool round.
TEST(Golden, OneCaseIsByteIdentical) {
  const Json got = run_golden(embedded_engine(), {"tool_round"});
  ASSERT_EQ(got["cases"].size(), 1u);
  const std::vector<std::string> diffs = compare_golden(got, blessed());
  EXPECT_TRUE(diffs.empty()) << fmt::format("{}", fmt::join(diffs, "\n"));
}

TEST(Golden, ADifferenceIsNamed) {
  Json want = blessed();
  Json got = want;
  Json& ids = got["cases"][0]["checkpoints"][0]["ids"];
  ASSERT_FALSE(ids.empty());
  ids[0] = ids[0].get<int>() + 1;
  got["cases"][1]["checkpoints"][0]["kv_fingerprint"] = "0000000000000000";
  const std::vector<std::string> diffs = compare_golden(got, want);
  ASSERT_EQ(diffs.size(), 2u);
  EXPECT_NE(diffs[0].find("plain checkpoint 0 (turn): ids: first difference at token 0"), std::string::npos)
      << diffs[0];
  EXPECT_NE(diffs[1].find("thinking checkpoint 0 (turn): kv_fingerprint"), std::string::npos) << diffs[1];
}

}  // namespace golden_test
}  // namespace dg::test
