// The golden gate on the CUDA backend (engine/golden.h): the same path matrix as Golden.* pinned by its own file,
// tests/fixtures/golden/cuda.json (the GPU's bytes differ from the CPU reference's). Blessed on the GPU machine with
// `diffgemma golden -m models/dg-tiny --backend cuda --bless`; skipped without a GPU or before that file exists.
#include <gtest/gtest.h>

#if defined(DG_WITH_CUDA)
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/cuda/cuda_check.h"
#include "engine/golden.h"
#include "support/paths.h"

namespace dg::test {
namespace golden_cuda_test {

TEST(GoldenCuda, TheProductionPathsAreByteIdentical) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const std::string file = source_path(golden_file("cuda"));
  if (!std::filesystem::exists(file))
    GTEST_SKIP() << file << " is not blessed yet: `diffgemma golden -m models/dg-tiny --backend cuda --bless`";
  EngineOptions o;
  o.model_dir = source_path("models/dg-tiny");
  o.backend = "cuda";
  const auto engine = EngineCore::open(o);
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::vector<std::string> diffs = compare_golden(run_golden(*engine), Json::parse(ss.str()));
  EXPECT_TRUE(diffs.empty()) << fmt::format("{}", fmt::join(diffs, "\n"))
                             << "\n(a deliberate change: `diffgemma golden -m models/dg-tiny --backend cuda --bless`)";
}

}  // namespace golden_cuda_test
}  // namespace dg::test
#endif
