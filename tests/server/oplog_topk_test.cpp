// `serve --attention-topk` is recorded in the op-log's open record and `diffgemma replay` takes it from there: the
// log replays identically with the recorded rule, and diverges when the replay is forced to dense attention (so the
// record is what makes it reproduce). The server's start line names the rule.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "server_test_util.h"
#include "support/paths.h"

namespace dg::test {
namespace oplog_topk_test {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(OpLogTopk, TheRuleIsRecordedAndReplayReproducesIt) {
  const std::string dir = scratch_dir("oplog-topk") + "/logs";
  {
    ServerProcess s("-m " + source_path("models/dg-tiny") + " --ctx 256 -q --attention-topk 2 --log-dir " + dir);
    ASSERT_GT(s.port, 0) << "the server did not start; see " << s.log_path;
    auto r = s.client().Post("/v1/chat/completions", chat_request("Tell me about the sea").dump(),
                             "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(s.stop(), 0);
    EXPECT_NE(read_all(s.log_path).find("attention top-k 2"), std::string::npos) << read_all(s.log_path);
  }
  const std::string path = only_log_in(dir);
  ASSERT_FALSE(path.empty());
  const json open = open_record_of(path);
  EXPECT_EQ(open.value("attention_topk", "?"), "2") << open.dump();

  expect_replay(path, "", true);
  expect_replay(path, "--attention-topk off", false);
}

}  // namespace oplog_topk_test
}  // namespace dg::test
