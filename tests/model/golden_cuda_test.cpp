// The golden gate on the CUDA backend (engine/golden.h): the same path matrix as Golden.* pinned by a file per card
// model, tests/fixtures/golden/cuda-<device>.json (the GPU's bytes differ from the CPU reference's, and between card
// models). Blessed on the GPU machine with `diffgemma golden -m models/dg-tiny --backend cuda --bless`; skipped
// without a GPU or before the card's file exists.
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
  EngineOptions o;
  o.model_dir = source_path("models/dg-tiny");
  o.backend = "cuda";
  const auto engine = EngineCore::open(o);
  const std::string device = engine->backend().device_name();
  const std::string file = source_path(golden_file("cuda", device));
  if (!std::filesystem::exists(file))
    GTEST_SKIP() << file << " (" << device << ") is not blessed yet: on this card, `diffgemma golden -m "
                 << "models/dg-tiny --backend cuda --bless`";
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
