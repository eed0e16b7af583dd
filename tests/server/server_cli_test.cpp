// `diffgemma serve`'s options for several API keys, end to end: keys given with --api-key (repeated, or separated
// by commas) and in an --api-key-file (one a line; blank lines and '#' comments skipped) are all accepted, nothing
// else is; a key file that cannot be read is an error that names it. (That each key is a tenant of its own:
// server_tenant_test.cpp.) A --ctx beyond the model's positions is held to them, said once at start (the default
// silently), and a request past them is a 400 context_length_exceeded, not an engine error. A --port past 65535 and
// a bound out of its range (a negative queue length, a zero body size or timeout) are usage errors, never another
// port or no bound.
#include <gtest/gtest.h>

#include <fstream>

#include "server_test_util.h"
#include "support/embedded_copy.h"
#include "support/paths.h"
#include "support/process.h"

namespace dg::test {
namespace server_cli_test {

TEST(ServerCli, ApiKeysComeFromTheOptionAndFromAFile) {
  const std::string file = scratch_dir("serve-keys") + "/keys";
  std::ofstream(file) << "# the team's keys\n\n  sk-file-1  \nsk-file-2\n";
  ServerProcess s("-m " + source_path("models/dg-tiny") +
                  " --ctx 256 -q --api-key sk-a,sk-b --api-key sk-c --api-key-file " + file);
  ASSERT_GT(s.port, 0) << "the server did not start; see " << s.log_path;
  httplib::Client c = s.client();
  for (const char* key : {"sk-a", "sk-b", "sk-c", "sk-file-1", "sk-file-2"}) {
    auto r = c.Get("/v1/models", {{"Authorization", std::string("Bearer ") + key}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << key;
  }
  for (const char* bad : {"Bearer # the team's keys", "Bearer sk-a,sk-b", "Bearer ", ""}) {
    auto r = bad[0] == '\0' ? c.Get("/v1/models") : c.Get("/v1/models", {{"Authorization", bad}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << bad;
  }
  std::ifstream log(s.log_path);
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("5 API key(s) required"), std::string::npos) << text;

  const ProcessResult missing = run_command(cli_path() + " serve --port 0 --api-key-file /nonexistent/keys", true);
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.out.find("cannot read --api-key-file '/nonexistent/keys'"), std::string::npos) << missing.out;
}

TEST(ServerCli, ABoundGivenOutOfRangeIsAUsageErrorNotNoBound) {
  // -1 for a count wrapped to 2^64 - 1: an unbounded queue; 0 bytes of body or 0 s of timeout left nothing servable.
  for (const char* bad : {"--max-queue -1", "--http-threads -3", "--max-body 0", "--timeout 0", "--header-timeout inf",
                          "--memory -1", "--slots -2", "--max-connections 0", "--ctx 0"}) {
    const ProcessResult r = run_command(cli_path() + " serve --port 0 " + bad, true);
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.out;
    EXPECT_NE(r.out.find(std::string(bad).substr(0, std::string(bad).find(' ')) + ": '"), std::string::npos)
        << bad << "\n" << r.out;
    EXPECT_EQ(r.out.find("listening on"), std::string::npos) << bad << "\n" << r.out;
  }
}

TEST(ServerCli, APortBeyondTheRangeIsAUsageErrorNotAnotherPort) {
  for (const char* port : {"99999", "65536", "-1"}) {
    const ProcessResult r = run_command(cli_path() + " serve --port " + port, true);
    EXPECT_EQ(r.code, 2) << port << "\n" << r.out;
    EXPECT_NE(r.out.find("is not a port number from 0 to 65535"), std::string::npos) << port << "\n" << r.out;
    EXPECT_EQ(r.out.find("listening on"), std::string::npos) << port << "\n" << r.out;
  }
}

TEST(ServerCli, AContextBeyondTheModelsPositionsIsHeldToThem) {
  // 300 positions and a 32-token canvas: a request may use 269 tokens, prompt and answer.
  ServerProcess s("-m " + embedded_model_with_positions(300) + " --ctx 100000");
  ASSERT_GT(s.port, 0) << "the server did not start; see " << s.log_path;
  std::ifstream log(s.log_path);
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("--ctx 100000 is beyond the model's 300 positions"), std::string::npos) << text;
  EXPECT_NE(text.find("up to 269 tokens"), std::string::npos) << text;
  EXPECT_NE(text.find("context 269"), std::string::npos) << text;

  httplib::Client c = s.client();
  auto post = [&](const json& body) { return c.Post("/v1/chat/completions", body.dump(), "application/json"); };
  std::string words;
  for (int i = 0; i < 400; ++i) words += " river";
  auto too_long = post(chat_request(words));
  ASSERT_TRUE(too_long);
  EXPECT_EQ(too_long->status, 400) << too_long->body;
  EXPECT_NE(too_long->body.find("context_length_exceeded"), std::string::npos) << too_long->body;
  EXPECT_NE(too_long->body.find("context holds 269"), std::string::npos) << too_long->body;
  auto too_many = post(chat_request("Hi", {{"max_tokens", 1000}}));
  ASSERT_TRUE(too_many);
  EXPECT_EQ(too_many->status, 400) << too_many->body;
  EXPECT_NE(too_many->body.find("context_length_exceeded"), std::string::npos) << too_many->body;
  auto fits = post(chat_request("Hi", {{"max_tokens", 16}}));
  ASSERT_TRUE(fits);
  EXPECT_EQ(fits->status, 200) << fits->body;
}

TEST(ServerCli, TheDefaultContextIsHeldToTheModelWithoutAWord) {
  // The default --ctx (8192) on a model of 300 positions: held to 269 like a given one, but nobody asked for 8192.
  ServerProcess s("-m " + embedded_model_with_positions(300));
  ASSERT_GT(s.port, 0) << "the server did not start; see " << s.log_path;
  std::ifstream log(s.log_path);
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.find("is beyond the model's"), std::string::npos) << text;
  EXPECT_NE(text.find("context 269"), std::string::npos) << text;
}

}  // namespace server_cli_test
}  // namespace dg::test
