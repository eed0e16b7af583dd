// The data shipped with diffgemma is found from any working directory: a build-tree binary reads the embedded model
// of the sources it was built from, and an installed one (`cmake --install`) the copies under
// <prefix>/share/diffgemma — the embedded model and the smoketest battery.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/process.h"

namespace dg::test {
namespace cli_install_test {

// `args` run by `binary` with the working directory `cwd`; stdout only.
ProcessResult run_in(const std::string& cwd, const std::string& binary, const std::string& args) {
  return run_command("cd '" + cwd + "' && " + binary + " " + args, false);
}

TEST(CliInstall, TheBuildTreeBinaryFindsTheEmbeddedModelFromAnyDirectory) {
  const std::string cwd = scratch_dir("cli-anywhere");
  const ProcessResult info = run_in(cwd, cli_path(), "info --json");
  ASSERT_EQ(info.code, 0) << info.out;
  EXPECT_EQ(nlohmann::json::parse(info.out)["dir"], source_path("models/dg-tiny"));
  const ProcessResult ask = run_in(cwd, cli_path(), "ask -p hi --steps 1 --max-new-tokens 8 -q --show-ids");
  EXPECT_EQ(ask.code, 0) << ask.out;
  EXPECT_FALSE(ask.out.empty());
}

TEST(CliInstall, AnInstalledBinaryReadsItsPrefix) {
  const std::string prefix = scratch_dir("cli-install") + "/prefix";
  const ProcessResult in =
      run_command("cmake --install '" + std::string(DG_BINARY_DIR) + "' --prefix '" + prefix + "'", true);
  ASSERT_EQ(in.code, 0) << in.out;
  const std::string bin = prefix + "/bin/diffgemma", data = prefix + "/share/diffgemma";
  const std::string cwd = scratch_dir("cli-install-cwd");

  const ProcessResult info = run_in(cwd, bin, "info --json");
  ASSERT_EQ(info.code, 0) << info.out;
  EXPECT_EQ(nlohmann::json::parse(info.out)["dir"], data + "/models/dg-tiny");
  const ProcessResult ask = run_in(cwd, bin, "ask -p hi --steps 1 --max-new-tokens 8 -q --show-ids");
  EXPECT_EQ(ask.code, 0) << ask.out;
  EXPECT_FALSE(ask.out.empty());
  const ProcessResult smoke = run_in(cwd, bin, "smoketest --only capital_france --max-new-tokens 16 -q");
  EXPECT_NE(smoke.out.find(data + "/smoketest/battery.json"), std::string::npos) << smoke.out;
  EXPECT_NE(smoke.out.find("capital_france"), std::string::npos) << smoke.out;
}

}  // namespace cli_install_test
}  // namespace dg::test
