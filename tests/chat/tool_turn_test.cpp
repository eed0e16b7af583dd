// Tool-turn continuation (chat/tool_turn.h, ChatSession): a tool round continues from the raw token log of the
// reply that called, with the reasoning as the model wrote it and the thought channel reopened; the cache is only
// extended; a request that echoes the calls without their reasoning (what clients send) is recognised; anything else
// is not. The reused fraction of the next round's prompt is printed for both ways of prompting it.
#include <gtest/gtest.h>

#include <fstream>

#include "chat_test_util.h"
#include "engine/chat.h"
#include "engine/oplog.h"
#include "serving/session_pool.h"
#include "support/embedded_engine.h"
#include "support/sequence_denoiser.h"

namespace dg::test {
namespace tool_turn_test {

const char* kTools = R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
    "properties":{"city":{"type":"string"}},"required":["city"]}}}])";

struct Rounds {
  TurnResult call, answer;
  std::vector<int32_t> after_call;  // the cache once the calling reply settled
  std::optional<ToolTurn> turn;
  std::vector<Json> records;
  bool canonical_at_end = false;
};

Rounds run(bool continuation) {
  const ChatTokens& t = tiny_chat_tokens();
  SequenceDenoiser d(embedded_engine().model(),
                     {ids({plain("The user wants the weather in Oslo, so I call the tool."), {t.channel_close},
                           {t.call_open}, plain("call:get_weather{city:"), {t.quote}, plain("Oslo"), {t.quote},
                           plain("}"), {t.call_close, t.response_open}}),
                      ids({plain("It is 18 C in Oslo."), {t.turn_close}})},
                     t.eos);
  const std::string log = scratch_dir("tool_turn") + "/ops.jsonl";
  Rounds out;
  {
    OpLog oplog(log);
    ChatOptions o;
    o.thinking = true;
    o.sampler = embedded_engine().default_sampler(SamplerProfile::kContract);
    o.sampler.max_new_tokens = 64;
    o.tool_continuation = continuation;
    o.denoiser = &d;
    o.oplog = &oplog;
    ChatSession chat(embedded_engine(), o);
    chat.set_tools(Json::parse(kTools));
    out.call = chat.user("Weather in Oslo?");
    out.after_call = chat.session().tokens();
    out.turn = chat.tool_turn();
    chat.add_tool_result("call_0", "18 C");
    out.answer = chat.generate();
    RenderOptions ro;
    ro.thinking = true;
    ro.add_generation_prompt = false;
    out.canonical_at_end =
        chat.session().tokens() == render_chat(chat.conversation(), ro, tiny_tokenizer(), tiny_chat_tokens()).ids;
    EXPECT_FALSE(chat.tool_turn().has_value()) << "the turn ended";
  }
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) out.records.push_back(Json::parse(line));
  return out;
}

TEST(ToolTurn, TheNextRoundExtendsTheRawTurnWithItsReasoning) {
  const Rounds r = run(true);
  ASSERT_EQ(r.call.finish, "tool_calls");
  ASSERT_TRUE(r.turn.has_value());
  const std::string cached = tiny_tokenizer().decode(r.after_call);
  EXPECT_NE(cached.find("<|turn>model\n<|channel>thought\nThe user wants the weather in Oslo, so I call the tool."
                        "<channel|><|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>}<tool_call|><|tool_response>"),
            std::string::npos)
      << "the reply stays as written (the render would add a newline before <channel|>): " << cached;
  EXPECT_EQ(r.after_call.back(), tiny_chat_tokens().response_open);
  EXPECT_EQ(r.answer.prompt.rewound, 0);
  EXPECT_EQ(r.answer.prompt.reused, static_cast<int64_t>(r.after_call.size())) << "a pure extension";
  // What the round was prompted with: the rendered result and the thought channel reopened.
  std::vector<int32_t> appended;
  for (const Json& j : r.records)
    if (j.value("op", "") == "sync" && j["job"] == 1) appended = j["append"].get<std::vector<int32_t>>();
  EXPECT_EQ(tiny_tokenizer().decode(appended),
            "response:get_weather{value:<|\"|>18 C<|\"|>}<tool_response|><|channel>thought\n")
      << "the cache already ended on <|tool_response>";
  EXPECT_TRUE(r.canonical_at_end) << "the round that ends the turn settles on the canonical render";
}

TEST(ToolTurn, WithoutContinuationTheRoundReRendersAndRewinds) {
  const Rounds r = run(false);
  EXPECT_FALSE(r.turn.has_value());
  const std::string cached = tiny_tokenizer().decode(r.after_call);
  EXPECT_EQ(cached.find("so I call the tool.<channel|>"), std::string::npos)
      << "the cache holds the re-rendered reply, not the one the model wrote: " << cached;
  EXPECT_EQ(r.answer.prompt.rewound, 0) << "the next round extends the canonical render";
  EXPECT_TRUE(r.canonical_at_end);
}

TEST(ToolTurn, RecognisesAClientsEchoAndNothingElse) {
  const Rounds r = run(true);
  ASSERT_TRUE(r.turn.has_value());
  const ToolTurn& turn = *r.turn;
  const Tokenizer& tok = tiny_tokenizer();
  const ChatTokens& t = tiny_chat_tokens();
  RenderOptions ro;
  ro.thinking = true;
  // What a client sends back: the calls without the reasoning, then the result.
  Conversation client = turn.conversation;
  client.messages.back().reasoning.clear();
  client.messages.push_back(message_from_json(Json::parse(R"({"role":"tool","tool_call_id":"call_0",
      "content":"18 C"})"), "m"));
  const std::optional<RenderedPrompt> q = continue_tool_turn(turn, client, ro, tok, t);
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->end, PromptEnd::kThought);
  const std::vector<int32_t> settled = tool_turn_settled(turn, t);
  const std::vector<int32_t> rendered = render_chat(client, ro, tok, t).ids;
  const double raw_reuse = static_cast<double>(common_prefix(settled, q->ids)) / static_cast<double>(q->ids.size());
  const double render_reuse =
      static_cast<double>(common_prefix(settled, rendered)) / static_cast<double>(rendered.size());
  EXPECT_EQ(common_prefix(settled, q->ids), static_cast<int64_t>(settled.size()));
  EXPECT_LT(render_reuse, raw_reuse);
  std::printf("next-round prompt reused from the cache: continuation %.3f (%lld of %zu tokens), re-render %.3f "
              "(%lld of %zu)\n", raw_reuse, static_cast<long long>(common_prefix(settled, q->ids)), q->ids.size(),
              render_reuse, static_cast<long long>(common_prefix(settled, rendered)), rendered.size());
  RecordProperty("reuse_continuation", std::to_string(raw_reuse));
  RecordProperty("reuse_rerender", std::to_string(render_reuse));

  auto refuses = [&](Conversation c, RenderOptions o) { return !continue_tool_turn(turn, c, o, tok, t).has_value(); };
  Conversation changed = client;
  changed.messages[0].content = "Weather in Bergen?";
  EXPECT_TRUE(refuses(changed, ro));
  Conversation args = client;
  args.messages[args.messages.size() - 2].tool_calls[0].arguments = Json{{"city", "Bergen"}};
  EXPECT_TRUE(refuses(args, ro));
  Conversation more = client;
  more.messages.push_back(Message{Role::kUser, "And tomorrow?"});
  EXPECT_TRUE(refuses(more, ro));
  Conversation no_result = turn.conversation;
  EXPECT_TRUE(refuses(no_result, ro));
  RenderOptions off = ro;
  off.thinking = false;
  EXPECT_TRUE(refuses(client, off));
}

}  // namespace tool_turn_test
}  // namespace dg::test
