// `diffgemma smoketest` end to end on the embedded model: a battery it cannot pass exits 4 and names each failure
// (table and JSON), --same-as compares pass sets, a malformed battery is an input error, and runs are
// deterministic. Whether the embedded model passes the committed battery is CI's smoketest step (.ci/run).
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/process.h"

namespace dg::test {
namespace smoketest_cli_test {

std::string model() { return "-m " + source_path("models/dg-tiny"); }

// Two prompts whose accepted answer is not a word any model writes.
std::string impossible_battery(const std::string& dir) {
  const nlohmann::json prompt = {{"name", "nonsense"}, {"kind", "adherence"}, {"prompt", "What is the capital of France?"},
                                 {"accept", {"zzqxjv"}}, {"max_steps", 48}};
  nlohmann::json second = prompt;
  second["name"] = "nonsense_think";
  second["think"] = true;
  const nlohmann::json b = {{"version", 1}, {"seed", 3}, {"max_new_tokens", 8}, {"prompts", {prompt, second}}};
  const std::string path = dir + "/battery.json";
  std::ofstream(path) << b.dump(1);
  return path;
}

nlohmann::json without_timings(nlohmann::json j) {
  for (auto& p : j["prompts"]) p.erase("seconds");
  return j;
}

TEST(SmoketestCli, FailingPromptsExitFourAndSayWhy) {
  const std::string battery = impossible_battery(scratch_dir("smoke"));
  const ProcessResult r = run_command(cli_path() + " smoketest " + model() + " --battery " + battery + " --steps 3 --json", false);
  ASSERT_EQ(r.code, 4) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["passed"], 0);
  EXPECT_EQ(j["total"], 2);
  EXPECT_EQ(j["seed"], 3);  // the battery's seed when --seed is not given
  EXPECT_EQ(j["sampler"], "contract");
  for (const auto& p : j["prompts"]) {
    EXPECT_FALSE(p["passed"].get<bool>());
    bool answer_named = false;
    for (const auto& why : p["failures"]) answer_named = answer_named || why.get<std::string>().rfind("answer: none of", 0) == 0;
    EXPECT_TRUE(answer_named) << p.dump();
    ASSERT_GE(p["rounds"].size(), 1u);
    for (const auto& s : p["rounds"][0]["steps"]) EXPECT_LE(s.get<int>(), 3);
  }
  const auto& s = j["stats"];
  EXPECT_GE(s["blocks"].get<int>(), 2);
  EXPECT_GE(s["forwards"].get<int>(), s["steps"].get<int>());
  EXPECT_LE(s["steps_per_block"].get<double>(), 3.0);
  EXPECT_EQ(s["stops"]["confident"].get<int>() + s["stops"]["plateau"].get<int>() + s["stops"]["entropy"].get<int>() +
                s["stops"]["max_steps"].get<int>(),
            s["blocks"].get<int>());

  const ProcessResult table = run_command(cli_path() + " smoketest " + model() + " --battery " + battery +
                                              " --steps 3 --sampler reference --only nonsense", false);
  EXPECT_EQ(table.code, 4) << table.out;
  EXPECT_NE(table.out.find("reference sampler"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("FAIL"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("passed 0/1; failed: nonsense"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("nonsense_think"), std::string::npos) << table.out;
}

TEST(SmoketestCli, SameSeedSameResultAndSameAsComparesPassSets) {
  const std::string dir = scratch_dir("smoke");
  const std::string battery = impossible_battery(dir);
  const std::string args = " smoketest " + model() + " --battery " + battery + " --steps 3 --json";
  const ProcessResult a = run_command(cli_path() + args, false), b = run_command(cli_path() + args, false);
  ASSERT_EQ(a.code, 4);
  EXPECT_EQ(without_timings(nlohmann::json::parse(a.out)), without_timings(nlohmann::json::parse(b.out)));

  std::ofstream(dir + "/same.json") << a.out;
  const ProcessResult same = run_command(cli_path() + args + " --same-as " + dir + "/same.json", false);
  EXPECT_EQ(nlohmann::json::parse(same.out)["differs_from_same_as"], nlohmann::json::array());
  auto claimed = nlohmann::json::parse(a.out);
  claimed["prompts"][1]["passed"] = true;  // an earlier run that passed one of them
  std::ofstream(dir + "/other.json") << claimed.dump();
  const ProcessResult other = run_command(cli_path() + args + " --same-as " + dir + "/other.json", false);
  EXPECT_EQ(other.code, 4);
  EXPECT_EQ(nlohmann::json::parse(other.out)["differs_from_same_as"], nlohmann::json::array({"nonsense_think"}));
}

TEST(SmoketestCli, KnownFailuresAreReportedButDoNotFailTheirProfile) {
  const std::string dir = scratch_dir("smoke");
  auto b = nlohmann::json::parse(std::ifstream(impossible_battery(dir)));
  for (auto& p : b["prompts"]) p["known_fail"] = {"contract"};
  std::ofstream(dir + "/known.json") << b.dump(1);
  const std::string args = " smoketest " + model() + " --battery " + dir + "/known.json --steps 3";
  const ProcessResult contract = run_command(cli_path() + args, false);
  EXPECT_EQ(contract.code, 0) << contract.out;
  EXPECT_NE(contract.out.find("XFAIL"), std::string::npos) << contract.out;
  EXPECT_NE(contract.out.find("passed 0/2; known failures: nonsense, nonsense_think"), std::string::npos)
      << contract.out;
  const ProcessResult reference = run_command(cli_path() + args + " --sampler reference --json", false);
  EXPECT_EQ(reference.code, 4) << reference.out;
  EXPECT_EQ(nlohmann::json::parse(reference.out)["unexpected_failures"].size(), 2u);
}

TEST(SmoketestCli, MalformedBatteryIsAnInputError) {
  const std::string dir = scratch_dir("smoke");
  std::ofstream(dir + "/bad.json") << R"({"prompts": [{"name": "x", "kind": "adherence", "prompt": "hi"}]})";
  const ProcessResult r = run_command(cli_path() + " smoketest " + model() + " --battery " + dir + "/bad.json", true);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("prompts[0] (x): missing \"max_steps\""), std::string::npos) << r.out;
  const ProcessResult only = run_command(cli_path() + " smoketest " + model() + " --battery " +
                                                source_path("tests/fixtures/smoketest/battery.json") + " --only nope", true);
  EXPECT_EQ(only.code, 2) << only.out;  // a usage error, before the model loads
  EXPECT_NE(only.out.find("--only: no prompt 'nope'"), std::string::npos) << only.out;
}

}  // namespace smoketest_cli_test
}  // namespace dg::test
