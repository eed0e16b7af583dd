// `diffgemma chat` under a terminal, driven as a user types: Ctrl-C stops the answer being generated and returns to
// the prompt with the exchange dropped and the KV cache back at its length before it; Ctrl-C at the prompt (with or
// without a half-typed line) keeps the session; Ctrl-D ends it with status 0. The reasoning is dimmed unless
// NO_COLOR is set.
#include <gtest/gtest.h>

#include <chrono>

#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/process.h"
#include "support/pty_process.h"

namespace dg::test {
namespace chat_terminal_test {

constexpr size_t kNone = std::string::npos;

TEST(ChatTerminal, CtrlCStopsTheAnswerAndKeepsTheSession) {
  const std::string chat = cli_path() + " chat -m " + source_path("models/dg-tiny") + " --history ''";
  // The empty conversation's cache length, as the JSONL mode reports it.
  const ProcessResult ready = run_command(chat + " -q --jsonl < /dev/null", false);
  ASSERT_EQ(ready.code, 0) << ready.out;
  const auto kv = nlohmann::json::parse(ready.out.substr(0, ready.out.find('\n')))["kv_tokens"].get<int64_t>();
  const std::string save = scratch_dir("chat_interrupt") + "/conversation.json";

  // Every block runs all its steps (the stop rules are off): an answer takes minutes unless it is interrupted.
  PtyProcess p(chat + " --steps 100000 --confidence-threshold 1e-30 --plateau-steps 0 --entropy-stop 0");
  size_t at = p.expect("> ", 0, 60);
  ASSERT_NE(at, kNone) << p.output();
  ASSERT_TRUE(p.type("Tell me a long story\r")) << p.output();
  at = p.expect("step ", at, 60);  // the live progress line: the answer is being denoised
  ASSERT_NE(at, kNone) << p.output();
  const auto t0 = std::chrono::steady_clock::now();
  p.send("\x03");
  at = p.expect("(interrupted: the exchange was dropped; kv " + std::to_string(kv) + " tokens)", at, 30);
  ASSERT_NE(at, kNone) << p.output();
  at = p.expect("> ", at, 10);
  ASSERT_NE(at, kNone) << p.output();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);

  ASSERT_TRUE(p.type("/save " + save + "\r")) << p.output();  // nothing of the dropped exchange is left in the conversation
  at = p.expect("(saved " + save + ": 0 messages)", at, 10);
  ASSERT_NE(at, kNone) << p.output();
  ASSERT_TRUE(p.type("\x03")) << p.output();  // at an empty prompt
  at = p.expect("> ", at, 10);
  ASSERT_NE(at, kNone) << p.output();
  ASSERT_TRUE(p.type("half a line\x03")) << p.output();  // drops the line
  at = p.expect("> ", at, 10);
  ASSERT_NE(at, kNone) << p.output();
  ASSERT_TRUE(p.type("/rewind\r")) << p.output();
  at = p.expect("(nothing to rewind)", at, 10);
  ASSERT_NE(at, kNone) << p.output();
  ASSERT_TRUE(p.type("\x04")) << p.output();  // Ctrl-D
  EXPECT_EQ(p.wait(20), 0) << p.output();
}

TEST(ChatTerminal, NoColorTurnsTheDimmedReasoningPlain) {
  const std::string chat = cli_path() + " chat -m " + source_path("models/dg-tiny") + " --history '' --think -q " +
                           "--steps 4 --max-new-tokens 32";
  for (const bool no_color : {false, true}) {
    PtyProcess p((no_color ? "env NO_COLOR=1 " : "") + chat);
    size_t at = p.expect("> ", 0, 60);
    ASSERT_NE(at, kNone) << p.output();
    ASSERT_TRUE(p.type("What is two plus two?\r")) << p.output();
    at = p.expect("> ", at, 60);  // the answer is done
    ASSERT_NE(at, kNone) << p.output();
    ASSERT_TRUE(p.type("\x04")) << p.output();
    EXPECT_EQ(p.wait(20), 0) << p.output();
    EXPECT_EQ(p.output().find("\033[2m") != std::string::npos, !no_color) << "NO_COLOR=" << no_color << "\n"
                                                                            << p.output();
  }
}

}  // namespace chat_terminal_test
}  // namespace dg::test
