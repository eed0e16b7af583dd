// Strict tool calls' commit-time constraint (src/diffusion/call_commit.h) in the block loop, on a scripted denoiser
// over a toy vocabulary: the rows outside a call stay the model's, a call's rows are walked through the call grammar
// (a value of the wrong type replaced, a stop token inside the call closing it, the call kept within the token
// budget), the state carries across blocks, a stray control token right after a call becomes <|tool_response>, and a
// call that could not close before the budget is not opened.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "diffusion/call_commit.h"
#include "diffusion/generate.h"
#include "support/toy_denoiser.h"

namespace dg {
namespace call_commit_test {

// Toy vocabulary: 0-2 pad, eos, bos; 11 <|"|>, 12 <tool_call|>, 13 <|tool_call>, 14 <|tool_response> (a stop).
// Lower ids have higher logits where the script does not decide, so a replacement takes the lowest id that fits.
const std::vector<std::string> kText = {"",  "",  "",  "}", "1", ",", "{", "call:", "f", "x", ":",
                                        "Q", "E", "",  "",  "Sure", " ", "a", "g"};
constexpr int32_t kQuote = 11, kClose = 12, kOpen = 13, kResponse = 14, kEos = 1;

std::shared_ptr<const ToolCallConstraint> constraint(const char* schema) {
  auto v = std::make_shared<JsonVocab>();
  v->bytes = kText;
  v->bytes[kQuote] = std::string(1, static_cast<char>(kQuoteByte));
  v->bytes[kClose] = std::string(1, static_cast<char>(kCloseByte));
  v->stop_ids = {kEos, kResponse};
  v->end_id = kResponse;
  auto c = std::make_shared<ToolCallConstraint>();
  c->vocab = v;
  c->open_id = kOpen;
  c->tools = {{"f", JsonSchema::compile(SchemaJson::parse(schema), "f", false)}};
  return c;
}
const char* kInteger = R"({"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]})";
const char* kString = R"({"type":"object","properties":{"x":{"type":"string"}},"required":["x"]})";

std::string text_of(std::span<const int32_t> ids) {
  std::string s;
  for (const int32_t id : ids)
    s += id == kQuote ? "<|\"|>" : id == kClose ? "<tool_call|>" : id == kOpen ? "<|tool_call>" : kText[id];
  return s;
}

GenerateResult run(const std::vector<int32_t>& script, const char* schema, int max_new = 64) {
  GenerationConfig g;
  g.eos_ids = {kEos, kResponse};
  g.max_new_tokens = max_new;
  g.max_denoising_steps = 6;
  SamplerOptions o = make_sampler_options(SamplerProfile::kContract, g, 0, 2);
  o.commit_trim_tau = 0;  // whole blocks: the script's positions are the answer's
  if (schema != nullptr) o.tool_calls = constraint(schema);
  test::ToyScriptDenoiser d(script, static_cast<int64_t>(kText.size()), kEos);
  ModelConfig c;
  c.window = 4;  // no layers: the cache only counts tokens
  KvCache kv(c, {});
  return generate(d, kv, std::vector<int32_t>{2, 16}, o);
}

int constrained(const GenerateResult& r) {
  int n = 0;
  for (const BlockInfo& b : r.blocks) n += b.constrained;
  return n;
}

TEST(CallCommit, AValueOfTheWrongTypeIsReplacedAndTheTextAroundTheCallKept) {
  // Sure <|tool_call>call:f{x:<|"|>a<|"|>}<tool_call|> Sure<|tool_response>: 16 rows, two blocks.
  const std::vector<int32_t> script = {15, 16, kOpen, 7, 8, 6, 9, 10, kQuote, 17, kQuote, 3, kClose, 16, 15, kResponse};
  const GenerateResult off = run(script, nullptr);
  EXPECT_EQ(text_of(off.tokens), "Sure <|tool_call>call:f{x:<|\"|>a<|\"|>}<tool_call|> Sure");
  EXPECT_EQ(constrained(off), 0);
  const GenerateResult on = run(script, kInteger);
  // The string's opening quote becomes the first digit the grammar allows; "a" after it the '}' that closes the
  // arguments; the quote after them <tool_call|>. The rows after the call are the model's again.
  EXPECT_EQ(text_of(on.tokens), "Sure <|tool_call>call:f{x:1}<tool_call|>}<tool_call|> Sure");
  EXPECT_EQ(constrained(on), 3);
  EXPECT_EQ(on.finish, FinishReason::kStop);
  EXPECT_EQ(on.stop_token, kResponse);
  // A valid call is the model's.
  const std::vector<int32_t> valid = {kOpen, 7, 8, 6, 9, 10, kQuote, 17, kQuote, 3, kClose, kResponse};
  const GenerateResult kept = run(valid, kString);
  EXPECT_EQ(text_of(kept.tokens), "<|tool_call>call:f{x:<|\"|>a<|\"|>}<tool_call|>");
  EXPECT_EQ(constrained(kept), 0);
}

TEST(CallCommit, AStopTokenInsideTheCallClosesIt) {
  const GenerateResult r = run({15, kOpen, 7, 8, 6, kResponse}, kInteger);
  EXPECT_EQ(text_of(r.tokens), "Sure<|tool_call>call:f{x:1}<tool_call|>");
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.stop_token, kEos) << "past the call the model's end";
  // A wrong tool name is refused too: "g" is not declared, the walk spells "f".
  const GenerateResult g = run({kOpen, 7, 18, kResponse}, kInteger);
  EXPECT_EQ(text_of(g.tokens), "<|tool_call>call:f{x:1}<tool_call|>");
}

TEST(CallCommit, AControlTokenRightAfterTheCallBecomesTheResponseOpener) {
  // The model closes its call twice, then pads: the stray <tool_call|> after the call becomes <|tool_response>, which
  // ends the reply waiting for the results.
  const std::vector<int32_t> script = {kOpen, 7, 8, 6, 9, 10, 4, 3, kClose, kClose, 0, 0, 15, kEos};
  const GenerateResult r = run(script, kInteger);
  EXPECT_EQ(text_of(r.tokens), "<|tool_call>call:f{x:1}<tool_call|>");
  EXPECT_EQ(r.stop_token, kResponse);
  EXPECT_EQ(constrained(r), 1);
  const GenerateResult off = run(script, nullptr);
  EXPECT_EQ(text_of(off.tokens), "<|tool_call>call:f{x:1}<tool_call|><tool_call|>Sure") << "pads print nothing";
}

TEST(CallCommit, TheCallClosesWithinTheTokenBudget) {
  // An endless string: the walk closes it when the rows left only just hold <|"|>}<tool_call|>.
  std::vector<int32_t> script = {kOpen, 7, 8, 6, 9, 10, kQuote};
  script.resize(40, 17);
  const GenerateResult r = run(script, kString, 20);
  ASSERT_EQ(r.tokens.size(), 20u);
  EXPECT_EQ(text_of(r.tokens), "<|tool_call>call:f{x:<|\"|>aaaaaaaaaa<|\"|>}<tool_call|>");
  EXPECT_EQ(r.finish, FinishReason::kLength) << "the budget ends the answer, not the call";
}

TEST(CallCommit, ACallThatCouldNotCloseIsNotOpened) {
  // call:f{x:0}<tool_call|> is 12 bytes after <|tool_call>: with 12 tokens left it opens, with 11 it does not.
  std::vector<int32_t> script(20, 16);
  script[8] = kOpen;
  const GenerateResult fits = run(script, kInteger, 21);
  EXPECT_NE(text_of(fits.tokens).find("<|tool_call>"), std::string::npos) << text_of(fits.tokens);
  const GenerateResult no = run(script, kInteger, 20);
  EXPECT_EQ(text_of(no.tokens).find("<|tool_call>"), std::string::npos) << text_of(no.tokens);
  EXPECT_EQ(constrained(no), 1);
}

}  // namespace call_commit_test
}  // namespace dg
