// ChatSession and Session on the embedded model (mechanics, not content; any weights): each turn extends the
// cache (prefix reuse), the cache always holds the canonical render, /rewind restores the KV byte for byte, a
// divergence past the sliding rings re-prefills, tool rounds continue in the model's turn, save/load round trips, a
// message that is not UTF-8 and a tool result that answers no call are refused before anything changes.
#include <gtest/gtest.h>

#include <fstream>

#include "chat_test_util.h"
#include "core/error.h"
#include "engine/chat.h"
#include "support/embedded_engine.h"
#include "support/expect_error.h"

namespace dg::test {
namespace chat_session_test {

ChatOptions quick(bool thinking = false) {
  ChatOptions o;
  o.thinking = thinking;
  o.sampler = embedded_engine().default_sampler(SamplerProfile::kContract);
  o.sampler.steps = 4;
  o.sampler.max_new_tokens = 40;
  return o;
}

std::vector<int32_t> canonical(const ChatSession& c) {
  RenderOptions ro;
  ro.thinking = c.options().thinking;
  ro.add_generation_prompt = false;
  return render_chat(c.conversation(), ro, tiny_tokenizer(), tiny_chat_tokens()).ids;
}

TEST(ChatSession, EachTurnExtendsTheCacheAndHoldsTheCanonicalRender) {
  ChatSession chat(embedded_engine(), quick());
  EXPECT_EQ(chat.kv_tokens(), 1);  // <bos>
  const TurnResult a = chat.user("Hello there");
  EXPECT_EQ(a.prompt.reused, 1);
  EXPECT_EQ(a.prompt.rewound, 0);
  EXPECT_FALSE(a.prompt.reprefilled);
  EXPECT_TRUE(same_ids(chat.session().tokens(), canonical(chat)));
  EXPECT_EQ(a.kv_fingerprint, chat.fingerprint());
  const TurnResult b = chat.user("And a second question");
  EXPECT_EQ(b.prompt.reused, a.kv_tokens) << "turn 2 must reuse everything turn 1 left in the cache";
  EXPECT_EQ(b.prompt.rewound, 0);
  Conversation asked = chat.conversation();
  asked.messages.pop_back();  // the prompt of turn 2: up to the new user turn and the generation prompt
  const size_t prompt = render_chat(asked, RenderOptions{}, tiny_tokenizer(), tiny_chat_tokens()).ids.size();
  EXPECT_EQ(b.prompt.encoded, static_cast<int64_t>(prompt) - a.kv_tokens) << "only the new tokens are encoded";
  EXPECT_TRUE(same_ids(chat.session().tokens(), canonical(chat)));
  ASSERT_EQ(chat.conversation().messages.size(), 4u);
  EXPECT_EQ(chat.conversation().messages[3].content, b.reply.content);
}

TEST(ChatSession, AMessageThatIsNotUtf8IsRefusedAndChangesNothing) {
  ChatSession chat(embedded_engine(), quick());
  chat.user("Hello there");
  const Conversation before = chat.conversation();
  const uint64_t fingerprint = chat.fingerprint();
  DG_EXPECT_ERROR(chat.user("caf\xc3"), "not valid UTF-8 at byte 3 of 4", "nothing was sent");
  EXPECT_EQ(chat.conversation().messages.size(), before.messages.size());
  EXPECT_EQ(chat.fingerprint(), fingerprint);
  EXPECT_NO_THROW(chat.user("And a second question"));
}

TEST(ChatSession, RewindRestoresTheKvByteForByteAndRegeneratesIdentically) {
  ChatSession chat(embedded_engine(), quick());
  const TurnResult first = chat.user("One");
  const uint64_t fp = chat.fingerprint();
  const std::vector<int32_t> log = chat.session().tokens();
  const TurnResult second = chat.user("Two, please answer at length");
  EXPECT_NE(chat.fingerprint(), fp);
  ASSERT_TRUE(chat.rewind());
  EXPECT_EQ(chat.fingerprint(), fp);
  EXPECT_EQ(chat.session().tokens(), log);
  EXPECT_EQ(chat.kv_tokens(), first.kv_tokens);
  const TurnResult again = chat.user("Two, please answer at length");
  EXPECT_EQ(again.reply.content, second.reply.content);
  EXPECT_EQ(again.kv_fingerprint, second.kv_fingerprint);
  ASSERT_TRUE(chat.rewind());
  ASSERT_TRUE(chat.rewind());
  EXPECT_FALSE(chat.rewind());
  EXPECT_EQ(chat.kv_tokens(), 1);
}

TEST(Session, DivergenceRewindsWithinTheRingsAndReprefillsBeyond) {
  const EngineCore& e = embedded_engine();
  KvOptions ko;
  ko.ring_slack = 16;
  Session s(e.model(), ko);
  std::vector<int32_t> log(400);
  for (size_t i = 0; i < log.size(); ++i) log[i] = 600 + static_cast<int32_t>(i % 500);
  EXPECT_EQ(s.sync(log).encoded, 400);
  std::vector<int32_t> near = log;
  near[395] = 7;  // 5 tokens back: inside the slack
  const SyncStats a = s.sync(near);
  EXPECT_EQ(a.reused, 395);
  EXPECT_EQ(a.rewound, 5);
  EXPECT_FALSE(a.reprefilled);
  std::vector<int32_t> far = log;
  far[100] = 7;  // 300 tokens back: the sliding rings no longer hold the window before it
  const SyncStats b = s.sync(far);
  EXPECT_TRUE(b.reprefilled);
  EXPECT_EQ(b.encoded, 400);
  EXPECT_EQ(s.tokens(), far);
  // The rebuilt cache equals a fresh one fed the same log in the same way.
  Session fresh(e.model(), ko);
  fresh.sync(far);
  EXPECT_EQ(s.fingerprint(), fresh.fingerprint());
  // Bad ids are refused with a message, and the session is unchanged.
  const std::vector<int32_t> bad = {2, -1};
  EXPECT_THROW(s.sync(bad), Error);
  EXPECT_EQ(s.tokens(), far);
}

TEST(ChatSession, ToolRoundsContinueInsideTheModelTurn) {
  ChatSession chat(embedded_engine(), quick());
  chat.set_tools(Json::parse(R"([{"type":"function","function":{"name":"get_time","description":"The time",
      "parameters":{"type":"object","properties":{"zone":{"type":"string"}},"required":["zone"]}}}])"));
  chat.add_message(message_from_json(Json::parse(R"({"role":"user","content":"What time is it in Oslo?"})"), "m"));
  chat.add_message(message_from_json(Json::parse(R"({"role":"assistant","content":null,"tool_calls":[
      {"id":"call_0","type":"function","function":{"name":"get_time","arguments":"{\"zone\":\"Europe/Oslo\"}"}}]})"),
                                     "m"));
  chat.settle();
  ASSERT_EQ(chat.pending_calls().size(), 1u);
  EXPECT_EQ(chat.session().tokens().back(), tiny_chat_tokens().response_open) << "the cache waits for a response";
  EXPECT_THROW(chat.generate(), Error);  // the call has no result yet
  EXPECT_THROW(chat.add_tool_result("call_9", "x"), Error);
  const int64_t before = chat.kv_tokens();
  chat.add_tool_result("call_0", "12:00");
  EXPECT_TRUE(chat.pending_calls().empty());
  const TurnResult r = chat.generate();
  EXPECT_EQ(r.prompt.reused, before) << "the response extends the cache after its <|tool_response> opener";
  EXPECT_EQ(r.prompt.rewound, 0);
  EXPECT_TRUE(same_ids(chat.session().tokens(), canonical(chat)));
  // The rendered response sits in the cache after the call, inside the same model turn.
  const std::string text = tiny_tokenizer().decode(chat.session().tokens());
  EXPECT_NE(text.find("<|tool_call>call:get_time{zone:<|\"|>Europe/Oslo<|\"|>}<tool_call|><|tool_response>response:"
                      "get_time{value:<|\"|>12:00<|\"|>}<tool_response|>"),
            std::string::npos)
      << text;
}

TEST(ChatSession, ThinkingTurnsDropTheirReasoningFromHistory) {
  ChatSession chat(embedded_engine(), quick(true));
  chat.user("Think about it");
  EXPECT_TRUE(same_ids(chat.session().tokens(), canonical(chat)));
  const std::string text = tiny_tokenizer().decode(chat.session().tokens());
  EXPECT_EQ(text.rfind("<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nThink about it<turn|>\n<|turn>model\n", 0),
            0u)
      << text;
  EXPECT_EQ(text.find("<|channel>"), std::string::npos) << "history keeps no thought channel";
}

TEST(ChatSession, SaveAndLoadRoundTrip) {
  const std::string path = scratch_dir("chat") + "/conv.json";
  ChatSession a(embedded_engine(), quick());
  a.set_system("Be brief.");
  a.user("Hi");
  a.save(path);
  ChatSession b(embedded_engine(), quick());
  b.load(path);
  EXPECT_EQ(b.session().tokens(), a.session().tokens());
  EXPECT_EQ(b.fingerprint(), a.fingerprint());
  EXPECT_THROW(b.load(path + ".missing"), Error);
  EXPECT_EQ(b.fingerprint(), a.fingerprint()) << "a failed load leaves the conversation as it was";
}

// A tool result that answers no call would be dropped by the template: a conversation holding one is refused, from
// a file or added as a message, and the conversation stays as it was.
TEST(ChatSession, AToolResultThatFollowsNoCallIsRefused) {
  const std::string path = scratch_dir("chat") + "/orphan.json";
  {
    std::ofstream f(path);
    f << R"({"messages":[{"role":"user","content":"Hi"},{"role":"tool","tool_call_id":"call_0","content":"42"}]})";
  }
  ChatSession chat(embedded_engine(), quick());
  chat.user("Hello");
  const uint64_t fp = chat.fingerprint();
  const size_t messages = chat.conversation().messages.size();
  DG_EXPECT_ERROR(chat.load(path), "messages[1] is a tool result that follows no tool call");
  EXPECT_EQ(chat.conversation().messages.size(), messages);
  EXPECT_EQ(chat.fingerprint(), fp);
  chat.add_message(message_from_json(Json::parse(R"({"role":"tool","tool_call_id":"x","content":"1"})"), "m"));
  DG_EXPECT_ERROR(chat.settle(), "follows no tool call");
  EXPECT_EQ(chat.conversation().messages.size(), messages);
  EXPECT_NO_THROW(chat.user("And again"));
}

}  // namespace chat_session_test
}  // namespace dg::test
