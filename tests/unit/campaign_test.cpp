// The campaign runner (smoketest/campaign.h, `diffgemma campaign`): arms × batteries on the embedded model into one
// directory, the re-report without a model equal to the report written, an arm with a misspelt option (any bad
// option) refused as a usage error before any model is opened, and the batteries found from any directory.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "engine/chat.h"
#include "smoketest/campaign.h"
#include "support/embedded_engine.h"
#include "support/paths.h"
#include "support/process.h"

namespace dg::test {
namespace campaign_test {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The committed battery cut to the named prompts.
std::string cut(const std::string& from, const std::vector<std::string>& names, const std::string& to) {
  Json j = Json::parse(slurp(source_path(from)));
  Json kept = Json::array();
  for (const Json& p : j["prompts"])
    if (std::find(names.begin(), names.end(), p["name"].get<std::string>()) != names.end()) kept.push_back(p);
  j["prompts"] = kept;
  std::ofstream(to) << j.dump(1);
  return to;
}

TEST(Campaign, ArmsTimesBatteriesIntoOneDirectoryAndReReported) {
  const std::string dir = scratch_dir("campaign");
  const std::string smoke = cut("tests/fixtures/smoketest/battery.json", {"capital_france", "hello"}, dir + "/s.json");
  const std::string progs = cut("tests/fixtures/programmatic/battery.json", {"sh_count", "py_sum_args"},
                                dir + "/p.json");
  smoke::CampaignArm base{"base", "", embedded_engine().default_sampler(SamplerProfile::kContract), false, {}};
  base.sampler.max_new_tokens = 48;
  smoke::CampaignArm ref = base;
  ref.name = "ref";
  ref.options = "--sampler reference";
  ref.sampler = embedded_engine().default_sampler(SamplerProfile::kReference);
  ref.sampler.max_new_tokens = 48;
  const std::string out = dir + "/run";
  const std::vector<Json> rows =
      smoke::run_campaign(embedded_engine(), {base, ref}, {{"smoke", smoke}, {"programmatic", progs}}, out, false);
  ASSERT_EQ(rows.size(), 8u);
  for (const Json& r : rows) {
    const std::string v = r["verdict"];
    if (r["battery"] == "smoke")
      EXPECT_TRUE(v == "pass" || v == "fail" || v == "xfail" || v == "xpass") << v;
    else
      EXPECT_TRUE(v == "pass" || v == "wrong_output" || v == "compile_fail") << v;
  }
  EXPECT_EQ(rows[0]["arm"], "base");
  EXPECT_EQ(rows[7]["arm"], "ref");
  const std::vector<Json> again = smoke::read_campaign(out);
  EXPECT_EQ(again.size(), rows.size());
  EXPECT_EQ(smoke::campaign_report(again), slurp(out + "/report.txt"));
  EXPECT_NE(slurp(out + "/campaign.json").find("--sampler reference"), std::string::npos);
  const ProcessResult cli = run_command(cli_path() + " campaign --report " + out, false);
  EXPECT_EQ(cli.code, 0);
  EXPECT_EQ(cli.out, slurp(out + "/report.txt"));
}

TEST(Campaign, SeedsAndOnlyRunEachPromptOncePerSeedAndCountValidToolCalls) {
  const std::string dir = scratch_dir("campaign_seeds");
  const std::string smoke = cut("tests/fixtures/smoketest/battery.json", {"hello", "tool_multiply"}, dir + "/s.json");
  smoke::CampaignArm off{"off", "--tool-check off", embedded_engine().default_sampler(SamplerProfile::kContract), false,
                         {ToolCheckMode::kOff, 0}};
  off.sampler.max_new_tokens = 48;
  smoke::CampaignScope scope{smoke::parse_seeds("3,5"), {"tool_multiply"}};
  const std::vector<Json> rows = smoke::run_campaign(embedded_engine(), {off}, {{"smoke", smoke}}, dir + "/run", false,
                                                     scope);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["seed"], 3);
  EXPECT_EQ(rows[1]["seed"], 5);
  int valid = 0;
  for (const Json& r : rows) {
    EXPECT_EQ(r["prompt"], "tool_multiply");
    ASSERT_TRUE(r.contains("tool_valid"));
    valid += r["tool_valid"].get<bool>() ? 1 : 0;
  }
  const std::string report = smoke::campaign_report(rows);
  EXPECT_NE(report.find(fmt::format("{}/2", valid)), std::string::npos) << report;
  EXPECT_EQ(smoke::parse_seeds("1-3,9"), (std::vector<uint64_t>{1, 2, 3, 9}));
  EXPECT_THROW(smoke::parse_seeds("1-x"), Error);
  EXPECT_THROW(smoke::parse_seeds("5-2"), Error);
}

TEST(Campaign, AMisspeltArmFailsBeforeAnyModelLoads) {
  const ProcessResult r = run_command(cli_path() + " campaign --model /nonexistent --out /tmp/x --arm 'a=--sed 3'");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--arm 'a=--sed 3'"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("/nonexistent"), std::string::npos) << "the model was not opened: " << r.out;
}

// Bad options are usage errors (exit 2) naming the option, before the model loads (they were runtime errors, exit
// 1); so are an arm name given twice (its rows could not be told apart) and --only naming no prompt of the batteries
// (it ran nothing and exited 0). The default batteries are found from any working directory, as smoketest's is (they
// were read relative to it).
TEST(Campaign, BadOptionsAreUsageErrorsAndTheBatteriesAreFoundFromAnyDirectory) {
  const std::string out = scratch_dir("campaign-usage") + "/runs";
  const std::string cli = "cd / && " + cli_path() + " campaign --model /nonexistent --out " + out + " ";
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"--arm 'a=--sed 3'", "--arm 'a=--sed 3'"},
           {"--arm a= --arm 'a=--steps 2'", "--arm 'a=--steps 2': an arm named 'a' is already given"},
           {"--battery bogus", "--battery 'bogus': smoke or programmatic"},
           {"--seeds 5-1", "--seeds: seeds '5-1': bad range"},
           {"--only no_such_prompt", "--only: no prompt 'no_such_prompt' in the chosen batteries (smoke)"},
           {"--battery programmatic --only capital_france", "--only: no prompt 'capital_france'"}}) {
    const ProcessResult r = run_command(cli + args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << ": " << r.out;
    EXPECT_EQ(r.out.find("/nonexistent"), std::string::npos) << "the model was not opened: " << r.out;
  }
  ProcessResult r = run_command("cd / && " + cli_path() + " campaign --model /nonexistent");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("give --out DIR"), std::string::npos) << r.out;
  r = run_command("cd / && " + cli_path() + " campaign -m " + source_path("models/dg-tiny") +
                  " --only capital_france --only sh_count --battery smoke --battery programmatic --seeds 1 -q --out " +
                  out);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("smoke               1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("programmatic        1"), std::string::npos) << r.out;
}

}  // namespace campaign_test
}  // namespace dg::test
