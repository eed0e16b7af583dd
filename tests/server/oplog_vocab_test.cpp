// `serve --vocab-act fp8` (the vocabulary products over fp8 copies of the table, which change results) is recorded in
// the op-log's open record with the other operand choices, and `diffgemma replay` takes it from there: the log
// replays identically with the recorded choice, and diverges when the replay is forced to the bf16 table.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "server_test_util.h"
#include "support/paths.h"
#include "support/process.h"

namespace dg::test {
namespace oplog_vocab_test {

TEST(OpLogVocab, TheOperandChoicesAreRecordedAndReplayReproducesThem) {
  const std::string dir = scratch_dir("oplog-vocab") + "/logs";
  {
    ServerProcess s("-m " + source_path("models/dg-tiny") + " --ctx 512 -q --vocab-act fp8 --log-dir " + dir);
    ASSERT_GT(s.port, 0) << "the server did not start; see " << s.log_path;
    // The reference sampler's categorical draws: a small change of the probabilities moves some draw.
    json req = chat_request("Write a long story about a lighthouse keeper and the sea.",
                            {{"sampler", "reference"}, {"seed", 7}, {"max_tokens", 256}});
    auto r = s.client().Post("/v1/chat/completions", req.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(s.stop(), 0);
  }
  std::string path;
  for (const auto& f : std::filesystem::directory_iterator(dir)) path = f.path().string();
  ASSERT_FALSE(path.empty());
  std::ifstream in(path);
  std::string first;
  std::getline(in, first);
  const json open = json::parse(first);
  EXPECT_EQ(open.value("vocab_act", "?"), "fp8") << first;
  EXPECT_EQ(open.value("expert_act", "?"), "auto") << first;
  EXPECT_EQ(open.value("linear_act", "?"), "auto") << first;

  const ProcessResult same = run_command(cli_path() + " replay " + path);
  EXPECT_EQ(same.code, 0) << same.out;
  EXPECT_NE(same.out.find("identical"), std::string::npos) << same.out;
  const ProcessResult bf16 = run_command(cli_path() + " replay --vocab-act bf16 " + path);
  EXPECT_EQ(bf16.code, 1) << bf16.out;
  EXPECT_NE(bf16.out.find("diverged"), std::string::npos) << bf16.out;
}

}  // namespace oplog_vocab_test
}  // namespace dg::test
