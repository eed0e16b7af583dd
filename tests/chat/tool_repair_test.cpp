// Tool-call validation and repair (engine/tool_repair.h) on the embedded model's sessions with scripted replies:
// a bad call is retried with the next seed or repaired through error tool responses, the cache ends at the prompt
// (the bad exchange and the feedback evaporate), the caller sees only the clean reply, and a reply that stays bad
// comes back whole with finish "tool_error".
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "chat_test_util.h"
#include "engine/chat.h"
#include "engine/oplog.h"
#include "engine/tool_repair.h"
#include "support/embedded_engine.h"
#include "support/sequence_denoiser.h"

namespace dg::test {
namespace tool_repair_test {

std::vector<int32_t> call(const std::string& key) {
  const ChatTokens& t = tiny_chat_tokens();
  return ids({{t.call_open}, plain("call:get_weather{" + key + ":"), {t.quote}, plain("Oslo"), {t.quote}, plain("}"),
              {t.call_close}});
}

struct Fixture {
  Json tools = Json::parse(R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
      "properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}}])");
  ToolSet set = ToolSet::from(tools);
  RenderedPrompt prompt;
  SamplerOptions opt = embedded_engine().default_sampler(SamplerProfile::kContract);
  std::string log = scratch_dir("tool_repair") + "/ops.jsonl";

  Fixture() {
    Conversation c;
    c.tools = tools;
    c.messages.push_back(Message{Role::kUser, "Weather in Oslo?"});
    prompt = render_chat(c, RenderOptions{}, tiny_tokenizer(), tiny_chat_tokens());
    opt.max_new_tokens = 64;
  }

  struct Run {
    TurnResult r;
    std::vector<ReplyEvent> events;
    std::vector<Json> records;
    uint64_t fingerprint = 0;
    std::vector<int32_t> cache;
    int generations = 0;
  };
  Run run(ToolCheckMode mode, std::vector<std::vector<int32_t>> replies, int attempts = 2) {
    Session s = embedded_engine().open_session();
    OpLog oplog(log);
    SessionRecorder rec(oplog);
    s.set_observer(&rec);
    SequenceDenoiser d(embedded_engine().model(), std::move(replies), tiny_chat_tokens().eos);
    Run out;
    ChatEvents ev;
    ev.on_reply = [&](const ReplyEvent& e) { out.events.push_back(e); };
    ev.on_tool_check = [&](const Json& j) { rec.note(j); };
    out.r = generate_checked_reply(s, tiny_tokenizer(), tiny_chat_tokens(), prompt, opt, set, {mode, attempts}, &ev,
                                   &d);
    out.fingerprint = s.fingerprint();
    out.cache = s.tokens();
    out.generations = d.generations();
    std::ifstream in(log);
    for (std::string line; std::getline(in, line);) out.records.push_back(Json::parse(line));
    std::remove(log.c_str());
    return out;
  }
};

std::vector<Json> ops(const std::vector<Json>& recs, const std::string& op) {
  std::vector<Json> out;
  for (const Json& j : recs)
    if (j.value("op", "") == op) out.push_back(j);
  return out;
}

TEST(ToolRepair, OffHandsTheInvalidCallOn) {
  Fixture f;
  const ChatTokens& t = tiny_chat_tokens();
  const auto run = f.run(ToolCheckMode::kOff, {ids({call("town"), {t.response_open}})});
  ASSERT_EQ(run.r.reply.tool_calls.size(), 1u);
  EXPECT_EQ(run.r.reply.tool_calls[0].arguments, Json({{"town", "Oslo"}}));
  EXPECT_EQ(run.generations, 1);
}

TEST(ToolRepair, RepairFeedsErrorsThenEvaporatesTheExchange) {
  Fixture f;
  const ChatTokens& t = tiny_chat_tokens();
  // The second reply goes on past <|tool_response> (not a stop token while repairing) with a made-up response.
  const std::vector<int32_t> hallucinated = ids({plain("response:get_weather{value:"), {t.quote}, plain("9 C"),
                                                 {t.quote}, plain("}"), {t.response_close, t.turn_close}});
  const auto run = f.run(ToolCheckMode::kRepair, {ids({call("town"), {t.response_open}}),
                                                  ids({call("city"), {t.response_open}, hallucinated})});
  EXPECT_EQ(run.generations, 2);
  EXPECT_EQ(run.r.finish, "tool_calls");
  EXPECT_EQ(run.r.tool_attempts, 1);
  ASSERT_EQ(run.r.reply.tool_calls.size(), 1u);
  EXPECT_EQ(run.r.reply.tool_calls[0].arguments, Json({{"city", "Oslo"}}));
  EXPECT_EQ(run.r.reply.stop_token, t.response_open) << "the reply ends at the response opener";
  EXPECT_TRUE(same_ids(run.r.raw, call("city")));
  // The caller saw only the clean reply.
  ASSERT_EQ(run.events.size(), 1u);
  EXPECT_EQ(run.events[0].kind, ReplyEvent::Kind::kToolCall);
  EXPECT_EQ(run.events[0].call.arguments, Json({{"city", "Oslo"}}));
  // The cache is back at the prompt's end, byte for byte.
  EXPECT_TRUE(same_ids(run.cache, f.prompt.ids));
  Session fresh = embedded_engine().open_session();
  fresh.sync(f.prompt.ids);
  EXPECT_EQ(run.fingerprint, fresh.fingerprint());
  // The op-log: the second generation followed the bad reply and one error response, without <|tool_response>
  // among its stop ids; the decisions are noted.
  const std::vector<Json> syncs = ops(run.records, "sync"), gens = ops(run.records, "generate");
  ASSERT_EQ(gens.size(), 2u);
  const auto stops = gens[1]["sampler"]["stop_ids"].get<std::vector<int32_t>>();
  EXPECT_EQ(std::find(stops.begin(), stops.end(), t.response_open), stops.end());
  ASSERT_GE(syncs.size(), 3u);
  const std::string fed = tiny_tokenizer().decode(syncs[1]["append"].get<std::vector<int32_t>>());
  EXPECT_NE(fed.find("<|tool_call>call:get_weather{town:<|\"|>Oslo<|\"|>}<tool_call|><|tool_response>response:"
                     "get_weather{error:<|\"|>invalid arguments for 'get_weather': $: the required property 'city' "
                     "is missing; $: unexpected property 'town'<|\"|>}<tool_response|>"),
            std::string::npos)
      << fed;
  EXPECT_EQ(syncs.back()["kv_len"], static_cast<int64_t>(f.prompt.ids.size())) << "rewound to the prompt's end";
  const std::vector<Json> notes = ops(run.records, "note");
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0]["outcome"], "repair");
  EXPECT_EQ(notes[1]["outcome"], "valid");
}

TEST(ToolRepair, RetryBumpsTheSeed) {
  Fixture f;
  const ChatTokens& t = tiny_chat_tokens();
  const auto run = f.run(ToolCheckMode::kRetry, {ids({call("town"), {t.response_open}}),
                                                 ids({call("city"), {t.response_open}})});
  EXPECT_EQ(run.r.finish, "tool_calls");
  EXPECT_EQ(run.r.tool_attempts, 1);
  ASSERT_EQ(run.r.reply.tool_calls.size(), 1u);
  EXPECT_EQ(run.r.reply.tool_calls[0].arguments, Json({{"city", "Oslo"}}));
  const std::vector<Json> gens = ops(run.records, "generate");
  ASSERT_EQ(gens.size(), 2u);
  EXPECT_EQ(gens[1]["sampler"]["seed"].get<uint64_t>(), f.opt.seed + 1);
  EXPECT_EQ(gens[1]["sampler"]["stop_ids"], gens[0]["sampler"]["stop_ids"]);
  const std::vector<Json> syncs = ops(run.records, "sync");
  EXPECT_EQ(syncs.back()["keep"], static_cast<int64_t>(f.prompt.ids.size())) << "each retry starts at the prompt";
}

TEST(ToolRepair, AReplyThatStaysInvalidComesBackRawWithToolError) {
  Fixture f;
  const ChatTokens& t = tiny_chat_tokens();
  const std::vector<int32_t> bad = ids({plain("Let me look."), call("town"), {t.response_open}});
  const std::vector<int32_t> truncated = ids({{t.call_open}, plain("call:get_weather{city:"), {t.turn_close}});
  const auto run = f.run(ToolCheckMode::kRepair, {bad, truncated, bad}, 2);
  EXPECT_EQ(run.generations, 3);
  EXPECT_EQ(run.r.finish, "tool_error");
  EXPECT_EQ(run.r.tool_attempts, 2);
  EXPECT_TRUE(run.r.reply.tool_calls.empty());
  EXPECT_EQ(run.r.reply.content, "Let me look.");
  ASSERT_EQ(run.r.reply.errors.size(), 1u);
  EXPECT_EQ(run.r.reply.errors[0].raw, "<|tool_call>call:get_weather{town:<|\"|>Oslo<|\"|>}<tool_call|>");
  EXPECT_NE(run.r.reply.errors[0].message.find("unexpected property 'town'"), std::string::npos);
  EXPECT_EQ(run.r.tool_problems.size(), 3u) << "the problems of every attempt";
  // The caller saw the first reply's text and its call as an error, nothing of the other attempts.
  std::string text;
  int errors = 0;
  for (const ReplyEvent& e : run.events) {
    if (e.kind == ReplyEvent::Kind::kContent) text += e.text;
    errors += e.kind == ReplyEvent::Kind::kToolError;
    EXPECT_TRUE(e.kind == ReplyEvent::Kind::kContent || e.kind == ReplyEvent::Kind::kToolError);
  }
  EXPECT_EQ(text, "Let me look.");
  EXPECT_EQ(errors, 1);
  ASSERT_FALSE(run.events.empty());
  EXPECT_EQ(run.events.back().kind, ReplyEvent::Kind::kToolError);
  EXPECT_TRUE(same_ids(run.cache, f.prompt.ids));
  EXPECT_EQ(ops(run.records, "note").back()["outcome"], "failed");
}

// On the embedded model: its calculator call passes the expression as a string, which this declaration makes an
// integer (docs/TOOLS.md measures the rates); the repair happens, is recorded, and `replay` re-runs it exactly.
TEST(ToolRepair, ARepairOnTheEmbeddedModelIsRecordedAndReplays) {
  const std::string log = scratch_dir("tool_repair_replay") + "/ops.jsonl";
  TurnResult r;
  {
    OpLog oplog(log);
    ChatOptions o;
    o.sampler = embedded_engine().default_sampler(SamplerProfile::kContract);
    o.sampler.seed = 1;
    o.oplog = &oplog;
    ChatSession chat(embedded_engine(), o);
    chat.set_tools(Json::parse(R"([{"type":"function","function":{"name":"calculator",
        "description":"Evaluates an arithmetic expression and returns the result.","parameters":{"type":"object",
        "required":["expression"],"properties":{"expression":{"type":"integer"}}}}}])"));
    r = chat.user("What is 347 times 29?");
  }
  ASSERT_GE(r.tool_attempts, 1);
  ASSERT_FALSE(r.tool_problems.empty());
  EXPECT_NE(r.tool_problems[0].find("$.expression: expected an integer, got a string"), std::string::npos)
      << r.tool_problems[0];
  const ReplayReport rep = replay_oplog(embedded_engine(), log);
  EXPECT_FALSE(rep.diverged) << rep.divergence;
  EXPECT_EQ(rep.jobs, 1 + r.tool_attempts);
}

TEST(ToolRepair, RepliesWithoutToolsAreNotChecked) {
  Fixture f;
  f.set = ToolSet();
  const ChatTokens& t = tiny_chat_tokens();
  const auto run = f.run(ToolCheckMode::kRepair, {ids({call("town"), {t.response_open}})});
  EXPECT_EQ(run.generations, 1);
  EXPECT_EQ(run.r.reply.tool_calls.size(), 1u);
}

}  // namespace tool_repair_test
}  // namespace dg::test
