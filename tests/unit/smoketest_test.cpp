// The smoketest battery: its schema (every malformed field named), the verdict rules on synthetic outcomes, the
// sampler statistics, and the committed battery's prompts rendered by the chat template exactly as trained.
#include <gtest/gtest.h>

#include "chat/template.h"
#include "io/tokenizer.h"
#include "smoketest/battery.h"
#include "smoketest/runner.h"
#include "support/expect_error.h"
#include "support/paths.h"

namespace dg::test {
namespace smoketest_test {

using smoke::BatteryPrompt;
using smoke::Outcome;
using smoke::Round;

const smoke::StopIds kIds{106, 1, 50};

Json prompt_json() {
  return Json::parse(R"({"name": "capital_france", "kind": "adherence", "prompt": "What is the capital of France?",
                         "accept": ["Paris"], "max_steps": 10})");
}

Json battery_json(const Json& prompt) { return Json{{"version", 1}, {"seed", 7}, {"prompts", Json::array({prompt})}}; }

BlockInfo block(int steps, StopRule stop = StopRule::kConfident, int kept = 32) {
  BlockInfo b;
  b.steps = b.forwards = steps;
  b.stop = stop;
  b.kept = kept;
  return b;
}

Outcome answer(const std::string& content, int32_t stop = 106, std::vector<int> steps = {5}, int tokens = 8) {
  Round r;
  r.content = content;
  r.stop_token = stop;
  r.tokens = tokens;
  for (int s : steps) r.blocks.push_back(block(s));
  Outcome o;
  o.rounds.push_back(r);
  return o;
}

BatteryPrompt parse_one(const Json& p) { return smoke::parse_battery(battery_json(p), "b.json").prompts.at(0); }

bool has(const std::vector<std::string>& why, const std::string& prefix) {
  for (const std::string& w : why)
    if (w.rfind(prefix, 0) == 0) return true;
  return false;
}

TEST(Smoketest, PhrasesMatchWholeWordsIgnoringCaseAndPunctuation) {
  EXPECT_EQ(smoke::normalize_words("The capital: PARIS!"), " the capital paris ");
  EXPECT_TRUE(smoke::has_phrase("The capital of France is Paris.", "paris"));
  EXPECT_FALSE(smoke::has_phrase("Parisian food", "Paris"));
  EXPECT_TRUE(smoke::has_phrase("1 + 1 = 2.", "2"));
  EXPECT_FALSE(smoke::has_phrase("1 + 1 = 12.", "2"));
  EXPECT_TRUE(smoke::has_phrase("7 x 9 = 63\n7 x 10 = 70", "7 x 10 = 70"));
  EXPECT_FALSE(smoke::has_phrase("anything", "!!"));  // a phrase with no word matches nothing
}

TEST(Smoketest, SchemaErrorsNameTheField) {
  Json p = prompt_json();
  p.erase("max_steps");
  DG_EXPECT_ERROR(parse_one(p), "b.json", "capital_france", "max_steps");
  p = prompt_json();
  p["kind"] = "trivia";
  DG_EXPECT_ERROR(parse_one(p), "unknown kind 'trivia'");
  p = prompt_json();
  p["acept"] = Json::array({"Paris"});
  DG_EXPECT_ERROR(parse_one(p), "unknown field \"acept\"");
  p = prompt_json();
  p["accept_regex"] = Json::array({"(unclosed"});
  DG_EXPECT_ERROR(parse_one(p), "bad regex '(unclosed'");
  p = prompt_json();
  p["kind"] = "tool";
  DG_EXPECT_ERROR(parse_one(p), "needs \"call\"");
  p = prompt_json();
  p["max_steps"] = 0;
  DG_EXPECT_ERROR(parse_one(p), "\"max_steps\" must be an integer >= 1");
  p = prompt_json();
  p["known_fail"] = Json::array({"greedy"});
  DG_EXPECT_ERROR(parse_one(p), "\"known_fail\" holds sampler profiles");
  Json b = battery_json(prompt_json());
  b["prompts"].push_back(prompt_json());
  DG_EXPECT_ERROR(smoke::parse_battery(b, "b.json"), "duplicate name 'capital_france'");
  b = battery_json(prompt_json());
  b["sampler"] = "greedy";
  DG_EXPECT_ERROR(smoke::parse_battery(b, "b.json"), "\"sampler\" must be contract or reference");
}

TEST(Smoketest, BareToolFunctionsAreWrappedAsOpenAiTools) {
  Json p = prompt_json();
  p["tools"] = Json::array({Json{{"name", "calculator"}, {"parameters", Json::object()}}});
  const BatteryPrompt bp = parse_one(p);
  ASSERT_EQ(bp.tools.size(), 1u);
  EXPECT_EQ(bp.tools[0]["type"], "function");
  EXPECT_EQ(bp.tools[0]["function"]["name"], "calculator");
}

TEST(Smoketest, VerdictsOnAnswers) {
  const BatteryPrompt p = parse_one(prompt_json());
  EXPECT_TRUE(smoke::check_outcome(p, answer("The capital of France is Paris."), kIds).empty());
  EXPECT_TRUE(has(smoke::check_outcome(p, answer("The capital of Peru is Lima."), kIds), "answer: none of \"Paris\""));
  EXPECT_TRUE(has(smoke::check_outcome(p, answer("Paris.", 106, {4, 11}), kIds), "steps: a block took 11 > 10"));
  EXPECT_TRUE(has(smoke::check_outcome(p, answer("Paris.", -1), kIds), "stop: no stop token"));
  EXPECT_TRUE(has(smoke::check_outcome(p, answer("Paris.", 50), kIds), "stop: ended by token 50"));
  EXPECT_TRUE(smoke::check_outcome(p, answer("Paris.", 1), kIds).empty());  // <eos> ends an answer too
  EXPECT_TRUE(has(smoke::check_outcome(p, answer("  \n"), kIds), "empty"));
  Outcome rendered = answer("Paris.");
  rendered.render_error = "prompt: token 3";
  EXPECT_TRUE(has(smoke::check_outcome(p, rendered, kIds), "render: prompt: token 3"));
  Outcome called = answer("Paris.");
  called.rounds[0].tool_calls.push_back(ToolCall{"call_0", "calculator", Json::object()});
  EXPECT_TRUE(has(smoke::check_outcome(p, called, kIds), "call: a tool call where an answer was expected"));
}

TEST(Smoketest, VerdictsOnRequireRejectRegexAndLength) {
  Json j = prompt_json();
  j["accept"] = Json::array();
  j["accept_regex"] = Json::array({"\\bparis\\b"});
  j["require"] = Json::array({"France"});
  j["reject"] = Json::array({"Lyon"});
  j["min_tokens"] = 6;
  const BatteryPrompt p = parse_one(j);
  EXPECT_TRUE(smoke::check_outcome(p, answer("France: PARIS."), kIds).empty());
  const auto why = smoke::check_outcome(p, answer("Lyon is big.", 106, {5}, 3), kIds);
  EXPECT_TRUE(has(why, "answer: none of \"/\\bparis\\b/\""));
  EXPECT_TRUE(has(why, "require: no \"France\""));
  EXPECT_TRUE(has(why, "reject: has \"Lyon\""));
  EXPECT_TRUE(has(why, "short: 3 tokens < 6"));
}

TEST(Smoketest, ToolPromptsNeedTheExactCallThenTheAnswer) {
  Json j = prompt_json();
  j["kind"] = "tool";
  j["accept"] = Json::array({"10063"});
  j["tools"] = Json::array({Json{{"name", "calculator"}, {"parameters", Json::object()}}});
  j["call"] = Json{{"name", "calculator"}, {"arguments", Json{{"expression", "347*29"}}}};
  j["tool_response"] = "10063";
  const BatteryPrompt p = parse_one(j);

  Round call;
  call.tool_calls.push_back(ToolCall{"call_0", "calculator", Json{{"expression", "347*29"}}});
  call.stop_token = 50;
  call.blocks.push_back(block(4));
  Outcome o;
  o.rounds = {call, answer("The answer is 10063.").rounds[0]};
  EXPECT_TRUE(smoke::check_outcome(p, o, kIds).empty());

  Outcome wrong = o;
  wrong.rounds[0].tool_calls[0].arguments = Json{{"expression", "347*61"}};
  EXPECT_TRUE(has(smoke::check_outcome(p, wrong, kIds), "call: wanted calculator{\"expression\":\"347*29\"}"));
  Outcome unended = o;
  unended.rounds[0].stop_token = 106;
  EXPECT_TRUE(has(smoke::check_outcome(p, unended, kIds), "call: not ended by <|tool_response>"));
  Outcome no_call = answer("10063.");
  EXPECT_TRUE(has(smoke::check_outcome(p, no_call, kIds), "call: wanted"));
  Outcome slow = o;
  slow.rounds[1].blocks[0].steps = 99;  // the answer round's blocks are budgeted too
  EXPECT_TRUE(has(smoke::check_outcome(p, slow, kIds), "steps: a block took 99"));
}

TEST(Smoketest, StatsCountBlocksRulesAndTokensPerForward) {
  Round r;
  r.tokens = 40;
  r.blocks = {block(10, StopRule::kConfident), block(14, StopRule::kEntropy, 20), block(48, StopRule::kNone, 32)};
  r.blocks[1].trimmed = true;
  r.blocks[0].rerolls = 1;
  r.blocks[0].forwards = 10 + 6;  // a re-rolled attempt of 6 steps
  r.blocks[2].pad_gated = 3;
  smoke::Stats s;
  s.add(r);
  Round plateau;
  plateau.tokens = 2;
  plateau.blocks = {block(8, StopRule::kPlateau, 32)};
  s.add(plateau);
  EXPECT_EQ(s.blocks, 4);
  EXPECT_EQ(s.steps, 10 + 14 + 48 + 8);
  EXPECT_EQ(s.forwards, 16 + 14 + 48 + 8);
  EXPECT_DOUBLE_EQ(s.steps_per_block(), 80.0 / 4);
  EXPECT_DOUBLE_EQ(s.answer_tokens_per_forward(), 42.0 / 86);
  EXPECT_DOUBLE_EQ(s.committed_per_forward(), (32.0 + 20 + 32 + 32) / 86);
  EXPECT_EQ(s.confident, 1);
  EXPECT_EQ(s.entropy, 1);
  EXPECT_EQ(s.budget, 1);
  EXPECT_EQ(s.plateau, 1);
  EXPECT_EQ(s.rerolls, 1);
  EXPECT_EQ(s.trims, 1);
  EXPECT_EQ(s.pad_gated, 3);
}

// The battery's raw prompts and tool continuation are what the model was trained on; the engine's chat path must
// render exactly those ids, or the battery would test a format the model never saw.
TEST(Smoketest, CommittedBatteryMatchesTheEngineRender) {
  const smoke::Battery b = smoke::load_battery(source_path("tests/fixtures/smoketest/battery.json"));
  const Tokenizer tok = Tokenizer::load(source_path("data/tokenizer.json"));
  const ChatTokens t = ChatTokens::from(tok);
  int tool_prompts = 0;
  for (const BatteryPrompt& p : b.prompts) {
    SCOPED_TRACE(p.name);
    ASSERT_FALSE(p.raw.empty());
    Conversation c;
    c.tools = p.tools;
    Message user;
    user.role = Role::kUser;
    user.content = p.prompt;
    c.messages.push_back(user);
    RenderOptions ro;
    ro.thinking = p.think;
    EXPECT_EQ(render_chat(c, ro, tok, t).ids, tok.encode(p.raw, SpecialTokens::kMatch));
    if (p.kind != "tool") continue;
    ++tool_prompts;
    Message call;
    call.role = Role::kAssistant;
    call.tool_calls.push_back(ToolCall{"call_0", p.call_name, p.call_arguments});
    Message result;
    result.role = Role::kTool;
    result.tool_call_id = "call_0";
    result.name = p.call_name;
    result.content = p.tool_response;
    c.messages.push_back(call);
    c.messages.push_back(result);
    EXPECT_EQ(render_chat(c, ro, tok, t).ids, tok.encode(p.continuation_raw, SpecialTokens::kMatch));
  }
  EXPECT_GE(tool_prompts, 1);
}

}  // namespace smoketest_test
}  // namespace dg::test
