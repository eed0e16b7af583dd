// Strict tool calls on the embedded model (diffusion/call_commit.h through ChatSession): the known-bad calculator
// calls of `tool_multiply` (the expression written as a string) are constrained while the canvas is denoised, so
// with a strict tool every call parses and validates — an integer where the schema says so; enums, a nested object,
// an array with bounds and required fields — with no repair (the check finds nothing), the same seed gives the same
// tokens, and the op-log replays. Without strict the same seeds write calls the schema refuses.
#include <gtest/gtest.h>

#include <cstdio>

#include "chat_test_util.h"
#include "engine/chat.h"
#include "engine/oplog.h"
#include "support/embedded_engine.h"

namespace dg::test {
namespace strict_tools_test {

Json calculator(const char* parameters, bool strict) {
  Json f = {{"name", "calculator"},
            {"description", "Evaluates an arithmetic expression and returns the result."},
            {"parameters", Json::parse(parameters)}};
  if (strict) f["strict"] = true;
  return Json::array({{{"type", "function"}, {"function", f}}});
}

// tool_multiply's calculator with the expression declared an integer: the model writes a string there.
const char* kInteger = R"({"type":"object","properties":{"expression":{"type":"integer"}},"required":["expression"]})";
// A nested object with an enum and an array of integers with bounds, every field required, nothing else.
const char* kRich = R"({"type":"object","properties":{"expression":{"type":"object","properties":{
    "op":{"enum":["add","multiply"]},"operands":{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3}},
    "required":["op","operands"],"additionalProperties":false}},"required":["expression"],"additionalProperties":false})";

struct Asked {
  TurnResult turn;
  int constrained = 0;  // rows the constraint replaced
  std::vector<ToolProblem> problems;  // what the check finds in the reply handed on
};

Asked ask(const Json& tools, uint64_t seed, ToolCheckOptions check, OpLog* log = nullptr) {
  const EngineCore& e = embedded_engine();
  ChatOptions co;
  co.sampler = e.default_sampler(SamplerProfile::kContract);
  co.sampler.seed = seed;
  co.sampler.steps = 4;
  co.sampler.max_new_tokens = 64;
  co.tool_check = check;
  co.oplog = log;
  ChatSession chat(e, co);
  chat.set_tools(tools);
  Asked r;
  ChatEvents ev;
  ev.on_block = [&](const BlockInfo& b) { r.constrained += b.constrained; };
  r.turn = chat.user("What is 347 times 29?", &ev);
  r.problems = ToolSet::from(tools).check(r.turn.reply, e.tokenizer(), tiny_chat_tokens());
  return r;
}

constexpr ToolCheckOptions kOff{ToolCheckMode::kOff, 0, false};

TEST(StrictTools, EmbeddedModelCallsAlwaysParseAndValidate) {
  int calls = 0, constrained = 0, invalid_without = 0;
  for (const char* schema : {kInteger, kRich})
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      const Asked strict = ask(calculator(schema, true), seed, kOff);
      const Asked loose = ask(calculator(schema, false), seed, kOff);
      ASSERT_FALSE(loose.turn.reply.tool_calls.empty() && loose.turn.reply.errors.empty())
          << "seed " << seed << ": the model opens a call without strict too";
      invalid_without += loose.problems.empty() ? 0 : 1;
      EXPECT_TRUE(strict.turn.reply.errors.empty()) << "seed " << seed << ": " << strict.turn.reply.errors[0].message
                                                    << " in " << strict.turn.reply.errors[0].raw;
      ASSERT_FALSE(strict.turn.reply.tool_calls.empty()) << "seed " << seed << ": " << strict.turn.reply.content;
      EXPECT_EQ(strict.turn.finish, "tool_calls");
      EXPECT_TRUE(strict.problems.empty()) << "seed " << seed << ": " << strict.problems[0].message;
      for (const ToolCall& c : strict.turn.reply.tool_calls) {
        EXPECT_EQ(c.name, "calculator");
        const Json& x = c.arguments["expression"];
        EXPECT_TRUE(schema == kInteger ? x.is_number_integer() : x.is_object() && x["operands"].size() >= 2)
            << c.arguments;
      }
      calls += static_cast<int>(strict.turn.reply.tool_calls.size());
      constrained += strict.constrained;
      EXPECT_EQ(loose.constrained, 0) << "nothing is constrained without a strict tool";
    }
  EXPECT_GE(calls, 6);
  EXPECT_GT(constrained, 0) << "the constraint had something to do";
  EXPECT_EQ(invalid_without, 6) << "without strict every one of these calls fails its schema";
}

TEST(StrictTools, TheCheckFindsNothingToRepairAndTheSameSeedGivesTheSameTokens) {
  // --strict-tools (ToolCheckOptions::strict) makes every declared tool strict; the default check stays on as the
  // backstop and adds no generation.
  const ToolCheckOptions repair{ToolCheckMode::kRepair, 2, true};
  const Asked a = ask(calculator(kInteger, false), 2, repair);
  const Asked b = ask(calculator(kInteger, false), 2, repair);
  EXPECT_EQ(a.turn.tool_attempts, 0);
  EXPECT_TRUE(a.turn.tool_problems.empty());
  ASSERT_EQ(a.turn.reply.tool_calls.size(), 1u);
  EXPECT_TRUE(a.turn.reply.tool_calls[0].arguments["expression"].is_number_integer());
  EXPECT_EQ(a.turn.raw, b.turn.raw);
  // Without strict the same seed needs the repair.
  const Asked loose = ask(calculator(kInteger, false), 2, {ToolCheckMode::kRepair, 2, false});
  EXPECT_GE(loose.turn.tool_attempts, 1);
}

TEST(StrictTools, TheOpLogRecordsTheConstraintAndReplays) {
  const std::string path = scratch_dir("strict_tools") + "/ops.jsonl";
  std::remove(path.c_str());
  Asked r;
  {
    OpLog log(path);
    r = ask(calculator(kRich, true), 3, kOff, &log);
  }
  ASSERT_FALSE(r.turn.reply.tool_calls.empty());
  const ReplayReport rep = replay_oplog(embedded_engine(), path);
  EXPECT_FALSE(rep.diverged) << rep.divergence;
  EXPECT_EQ(rep.jobs, 1);
}

}  // namespace strict_tools_test
}  // namespace dg::test
