// `serve --vocab-act fp8` (the vocabulary products over fp8 copies of the table, which change results) is recorded in
// the op-log's open record with the other operand choices, and `diffgemma replay` takes it from there: the log
// replays identically with the recorded choice, and diverges when the replay is forced to the bf16 table.
#include <gtest/gtest.h>

#include "server_test_util.h"
#include "support/paths.h"

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
  const std::string path = only_log_in(dir);
  ASSERT_FALSE(path.empty());
  const json open = open_record_of(path);
  EXPECT_EQ(open.value("vocab_act", "?"), "fp8") << open.dump();
  EXPECT_EQ(open.value("expert_act", "?"), "auto") << open.dump();
  EXPECT_EQ(open.value("linear_act", "?"), "auto") << open.dump();

  expect_replay(path, "", true);
  expect_replay(path, "--vocab-act bf16", false);
}

}  // namespace oplog_vocab_test
}  // namespace dg::test
