// Long prompts through the CLI. A prompt beyond the model's context (max_position_embeddings) is an error naming
// the limit, the prompt's length and the most that fits, in `ask` and in `chat` (where the session goes on: a
// shorter message or /clear). On a terminal a long prefill shows a live line per --prefill-chunk (tokens so far /
// total, tokens/s) on stderr; not with -q, TERM=dumb or stderr not a terminal. The chat cases run the embedded
// model under a 160-position config, so every prompt is short.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/embedded_copy.h"
#include "support/paths.h"
#include "support/process.h"
#include "support/pty_process.h"
#include "support/tiny_checkpoint.h"

namespace dg::test {
namespace cli_long_prompt_test {

constexpr size_t kNone = std::string::npos;

std::string words(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += " river";  // one token each
  return s;
}

std::string ask() { return cli_path() + " ask -m " + source_path("models/dg-tiny") + " "; }

TEST(CliLongPrompt, AskBeyondTheContextNamesTheLimitTheLengthAndTheMostThatFits) {
  std::string ids = "5";
  for (int i = 1; i < 8200; ++i) ids += ",5";
  const ProcessResult r = run_command(ask() + "--prompt-ids " + ids, true);
  EXPECT_NE(r.code, 0) << r.out;
  for (const char* part : {"error: the prompt is 8200 tokens long", "8192 positions", "max_position_embeddings",
                           "32-token canvas", "shorten the prompt to at most 8160 tokens"})
    EXPECT_NE(r.out.find(part), kNone) << part << "\n" << r.out;

  const std::string file = scratch_dir("cli-long-prompt") + "/prompt.txt";
  write_text_file(file, words(9000));  // a chat turn of some 9,000 tokens
  const ProcessResult f = run_command(ask() + "--prompt-file " + file, true);
  EXPECT_NE(f.code, 0) << f.out;
  EXPECT_NE(f.out.find("tokens long, too long for this model"), kNone) << f.out;
  EXPECT_NE(f.out.find("at most 8160 tokens"), kNone) << f.out;
}

TEST(CliLongPrompt, ChatJsonlReportsATurnThatNoLongerFitsAndGoesOn) {
  const std::string model = embedded_model_with_positions(160);
  const std::string in = scratch_dir("cli-long-chat") + "/in.jsonl";
  auto user = [](const std::string& text) { return nlohmann::json{{"op", "user"}, {"text", text}}.dump() + "\n"; };
  write_text_file(in, user(words(60)) + user(words(60)) + user("hi") + "{\"op\":\"clear\"}\n" + user(words(60)));
  const ProcessResult r = run_command(cli_path() + " chat --jsonl -q --steps 2 --max-new-tokens 8 -m " + model +
                                          " < " + in,
                                      false);
  ASSERT_EQ(r.code, 0) << r.out;
  std::vector<nlohmann::json> ev;
  for (size_t at = 0, nl; (nl = r.out.find('\n', at)) != kNone; at = nl + 1)
    ev.push_back(nlohmann::json::parse(r.out.substr(at, nl - at)));
  std::vector<std::string> kinds;
  for (const auto& e : ev)
    if (e["event"] != "delta" && e["event"] != "reasoning") kinds.push_back(e["event"]);
  EXPECT_EQ(kinds, (std::vector<std::string>{"ready", "turn_end", "error", "turn_end", "ok", "turn_end"})) << r.out;
  for (const auto& e : ev) {
    if (e["event"] != "error") continue;
    const std::string msg = e["message"];
    for (const char* part : {"no longer fits", "160 positions", "max_position_embeddings", "clear or rewind"})
      EXPECT_NE(msg.find(part), kNone) << part << "\n" << msg;
  }
}

TEST(CliLongPrompt, APrefillShowsItsChunksOnATerminalOnly) {
  // TERM set: the test's own environment may have none, or a dumb one.
  const std::string xterm = "env TERM=xterm ";
  const std::string args = ask() + "--raw --steps 2 --max-new-tokens 8 --prefill-chunk 16 -p '" + words(100) + "'";
  {
    PtyProcess p(xterm + args);
    EXPECT_EQ(p.wait(60), 0) << p.output();
    EXPECT_NE(p.output().find("prompt 16 / 100 tokens (16%) · "), kNone) << p.output();
    EXPECT_NE(p.output().find("prompt 96 / 100 tokens (96%) · "), kNone) << p.output();
    EXPECT_NE(p.output().find(" tokens/s"), kNone) << p.output();
  }
  const auto quiet = [](const std::string& out) { return out.find("prompt 16 /") == kNone; };
  for (const std::string& variant : {xterm + args + " -q", "env TERM=dumb " + args}) {
    PtyProcess p(variant);
    EXPECT_EQ(p.wait(60), 0) << p.output();
    EXPECT_TRUE(quiet(p.output())) << variant << "\n" << p.output();
  }
  const ProcessResult piped = run_command(xterm + args, true);  // stderr is a pipe
  EXPECT_EQ(piped.code, 0) << piped.out;
  EXPECT_TRUE(quiet(piped.out)) << piped.out;
  EXPECT_NE(piped.out.find("prompt      "), kNone) << "the summary line stays\n" << piped.out;
}

TEST(CliLongPrompt, ChatOnATerminalShowsThePrefillAndKeepsTheSessionPastAnOverlongTurn) {
  const std::string model = embedded_model_with_positions(160);
  PtyProcess p("env TERM=xterm " + cli_path() +
               " chat --history '' --steps 2 --max-new-tokens 8 --prefill-chunk 16 -m " + model);
  size_t at = p.expect("> ", 0, 60);
  ASSERT_NE(at, kNone) << p.output();
  ASSERT_TRUE(p.type(words(60) + "\r")) << p.output();
  at = p.expect("prompt 16 / ", at, 60);
  ASSERT_NE(at, kNone) << p.output();
  at = p.expect("> ", at, 60);
  ASSERT_NE(at, kNone) << p.output();
  ASSERT_TRUE(p.type(words(60) + "\r")) << p.output();
  at = p.expect("error: the conversation no longer fits", at, 60);
  ASSERT_NE(at, kNone) << p.output();
  at = p.expect("> ", at, 10);
  ASSERT_NE(at, kNone) << p.output();
  ASSERT_TRUE(p.type("/clear\r")) << p.output();
  at = p.expect("(conversation cleared)", at, 10);
  ASSERT_NE(at, kNone) << p.output();
  ASSERT_TRUE(p.type(words(60) + "\r")) << p.output();
  at = p.expect("tokens · ", at, 60);  // the turn's summary line: it was answered
  ASSERT_NE(at, kNone) << p.output();
  ASSERT_TRUE(p.type("\x04")) << p.output();
  EXPECT_EQ(p.wait(20), 0) << p.output();
}

}  // namespace cli_long_prompt_test
}  // namespace dg::test
