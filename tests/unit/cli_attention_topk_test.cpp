// --attention-topk through the diffgemma binary: ask, chat, serve, replay, smoketest and bench take off | dyn | K and
// reject anything else as a usage error naming the option, before a model loads; ask answers with it on; bench
// records the rule in every JSON line, normalised ("064" is 64), and "off" without it. (The op-log's record and its
// replay: tests/server/oplog_topk_test.cpp.)
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/process.h"

namespace dg::test {
namespace cli_attention_topk_test {

std::string model() { return "-m " + source_path("models/dg-tiny"); }

TEST(CliAttentionTopk, BadValuesAreUsageErrorsNamingTheOption) {
  const std::vector<std::string> commands = {"ask " + model() + " -p hi", "chat " + model(),
                                             "serve " + model() + " --port 0", "replay /nonexistent/ops.jsonl",
                                             "smoketest " + model(), "bench --backend cpu"};
  for (const std::string& cmd : commands)
    for (const char* bad : {"0", "4097", "dense", "1.5"}) {
      const ProcessResult r = run_command(cli_path() + " " + cmd + " --attention-topk " + bad + " < /dev/null", true);
      EXPECT_EQ(r.code, 2) << cmd << " " << bad << "\n" << r.out;
      EXPECT_NE(r.out.find(std::string("--attention-topk: '") + bad +
                           "' is not off, dyn or a number of keys from 1 to 4096"),
                std::string::npos)
          << cmd << "\n" << r.out;
    }
}

std::vector<nlohmann::json> bench_lines(const std::string& extra) {
  const ProcessResult r = run_command(cli_path() + " bench --backend cpu --prefill 16 --context 16 --denoise-steps 1 "
                                                   "--skip-generate --json -q" + extra,
                                      false);
  EXPECT_EQ(r.code, 0) << r.out;
  std::vector<nlohmann::json> lines;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  EXPECT_GE(lines.size(), 3u) << r.out;
  return lines;
}

TEST(CliAttentionTopk, BenchRecordsTheRuleAndAskAnswersWithIt) {
  for (const auto& [arg, recorded] : {std::pair{"", "off"}, std::pair{" --attention-topk 064", "64"}})
    for (const nlohmann::json& j : bench_lines(arg)) EXPECT_EQ(j.value("attention_topk", "?"), recorded) << j.dump();
  const ProcessResult ask = run_command(
      cli_path() + " ask " + model() + " -p hi -q --max-new-tokens 8 --steps 2 --attention-topk 1", false);
  EXPECT_EQ(ask.code, 0) << ask.out;
}

}  // namespace cli_attention_topk_test
}  // namespace dg::test
