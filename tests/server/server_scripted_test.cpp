// The wire format of what a real model writes, with scripted replies on the real sessions: tool calls (plain and
// streamed, then the round trip with the result, reusing the cache), reasoning split from content with thinking
// on and off, stop strings, draft previews, and no channel or tool markup ever reaching content.
#include <gtest/gtest.h>

#include "chat/template.h"
#include "server_test_util.h"

namespace dg::test {
namespace server_scripted_test {

const json kTools = weather_tools();

void expect_no_markup(const std::string& text) {
  for (const char* m : {"<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "call:", "<|\"|>", "thought\n",
                        "<turn|>", "<|tool_response>"})
    EXPECT_EQ(text.find(m), std::string::npos) << "markup '" << m << "' leaked into: " << text;
}

// The concatenated deltas of a stream, by field.
struct Streamed {
  std::string content, reasoning, finish;
  json tool_calls = json::array();
  int drafts = 0;
  bool done = false;
};

Streamed collect(const std::string& body) {
  const SseStream st = parse_sse(body);
  EXPECT_TRUE(st.error.empty()) << st.error;
  Streamed s;
  s.done = st.done;
  for (const json& c : st.chunks) {
    if (c.contains("diffgemma_draft")) ++s.drafts;
    if (c["choices"].empty()) continue;
    const json& d = c["choices"][0]["delta"];
    if (d.contains("content")) s.content += d["content"].get<std::string>();
    if (d.contains("reasoning_content")) s.reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("tool_calls"))
      for (const json& tc : d["tool_calls"]) s.tool_calls.push_back(tc);
    if (!c["choices"][0]["finish_reason"].is_null()) s.finish = c["choices"][0]["finish_reason"];
  }
  return s;
}

TEST(ServerScripted, ToolCallsComeBackAsToolCallsWithReasoningApart) {
  TestServer s({}, true);
  for (const bool thinking : {false, true}) {
    auto r = s.post("/v1/chat/completions",
                    chat_request("What's the weather in Paris?",
                                 {{"tools", kTools}, {"max_tokens", 64}, {"thinking", thinking}}));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json j = json::parse(r->body);
    const json& m = j["choices"][0]["message"];
    EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
    EXPECT_EQ(m["content"], "");
    EXPECT_EQ(m["reasoning_content"], "The user wants the weather; I will call the tool.") << "thinking " << thinking;
    ASSERT_EQ(m["tool_calls"].size(), 1u) << m;
    const json& tc = m["tool_calls"][0];
    EXPECT_EQ(tc["id"].get<std::string>().rfind("call_", 0), 0u);
    EXPECT_EQ(tc["type"], "function");
    EXPECT_EQ(tc["function"]["name"], "get_weather");
    EXPECT_EQ(json::parse(tc["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  }
}

TEST(ServerScripted, StreamedToolCallsAreDeltaToolCallChunks) {
  TestServer s({}, true);
  auto r = s.post("/v1/chat/completions",
                  chat_request("weather?", {{"tools", kTools}, {"max_tokens", 64}, {"stream", true}}));
  ASSERT_TRUE(r);
  const Streamed st = collect(r->body);
  EXPECT_TRUE(st.done);
  EXPECT_EQ(st.finish, "tool_calls");
  EXPECT_EQ(st.reasoning, "The user wants the weather; I will call the tool.");
  EXPECT_EQ(st.content, "");
  EXPECT_EQ(st.drafts, 0) << "draft previews are off by default";
  ASSERT_EQ(st.tool_calls.size(), 1u);
  EXPECT_EQ(st.tool_calls[0]["index"], 0);
  EXPECT_EQ(st.tool_calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(st.tool_calls[0]["function"]["arguments"].get<std::string>())["city"], "Paris");
  expect_no_markup(r->body);
}

TEST(ServerScripted, AToolResultContinuesTheTurnFromTheCache) {
  TestServer s({}, true);
  json req = chat_request("weather in Paris?", {{"tools", kTools}, {"max_tokens", 64}});
  auto r1 = s.post("/v1/chat/completions", req);
  ASSERT_TRUE(r1);
  ASSERT_EQ(r1->status, 200) << r1->body;
  const json call_msg = json::parse(r1->body)["choices"][0]["message"];
  const json call_usage = json::parse(r1->body)["usage"];
  json msgs = req["messages"];
  msgs.push_back(call_msg);
  msgs.push_back({{"role", "tool"}, {"tool_call_id", call_msg["tool_calls"][0]["id"]}, {"content", "18 C, sunny"}});
  req["messages"] = msgs;
  auto r2 = s.post("/v1/chat/completions", req);
  ASSERT_TRUE(r2);
  ASSERT_EQ(r2->status, 200) << r2->body;
  const json j = json::parse(r2->body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "It is 18 C in Paris.");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");

  Conversation conv;
  conv.tools = kTools;
  for (size_t i = 0; i + 1 < msgs.size(); ++i) conv.messages.push_back(message_from_json(msgs[i], "m"));
  RenderOptions ro;
  ro.add_generation_prompt = false;
  const Tokenizer& tok = tiny_server_engine().tokenizer();
  const size_t canonical = render_chat(conv, ro, tok, ChatTokens::from(tok)).ids.size();
  const auto cached = j["usage"]["prompt_tokens_details"]["cached_tokens"].get<size_t>();
  EXPECT_EQ(cached, call_usage["prompt_tokens"].get<size_t>() + call_usage["completion_tokens"].get<size_t>() + 1)
      << "the call turn stays in the cache as generated, then <|tool_response>; the result extends it";
  EXPECT_GE(cached, canonical) << "at least the canonical render of the call turn";
}

TEST(ServerScripted, StopStringsCutTheAnswerInBothModes) {
  TestServer s({}, true);
  const json req = chat_request("count please", {{"stop", json::array({"STOP", "never"})}, {"max_tokens", 64}});
  auto r = s.post("/v1/chat/completions", req);
  ASSERT_TRUE(r);
  const json j = json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "one two three ");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  json sreq = req;
  sreq["stream"] = true;
  auto rs = s.post("/v1/chat/completions", sreq);
  ASSERT_TRUE(rs);
  const Streamed st = collect(rs->body);
  EXPECT_EQ(st.content, "one two three ");
  EXPECT_EQ(st.finish, "stop");
  auto full = s.post("/v1/chat/completions", chat_request("count please", {{"max_tokens", 64}}));
  ASSERT_TRUE(full);
  EXPECT_EQ(json::parse(full->body)["choices"][0]["message"]["content"], "one two three STOP four five");
}

TEST(ServerScripted, MarkerLiteralsTheModelSpellsStayPlainTextAndComeBackAccepted) {
  TestServer s({}, true);
  json req = chat_request("show markup", {{"max_tokens", 64}});
  auto r = s.post("/v1/chat/completions", req);
  ASSERT_TRUE(r);
  const json m = json::parse(r->body)["choices"][0]["message"];
  EXPECT_EQ(m["content"], "a <|turn> b");
  req["messages"].push_back(m);
  req["messages"].push_back({{"role", "user"}, {"content", "and again"}});
  auto r2 = s.post("/v1/chat/completions", req);
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->status, 200) << "the model's own answer is not refused when it comes back: " << r2->body;
}

TEST(ServerScripted, DraftPreviewsWhenAsked) {
  TestServer s({}, true);
  auto r = s.post("/v1/chat/completions",
                  chat_request("hello", {{"max_tokens", 64}, {"steps", 3}, {"stream", true}, {"drafts", true}}));
  ASSERT_TRUE(r);
  const Streamed st = collect(r->body);
  EXPECT_GE(st.drafts, 1);
  EXPECT_LE(st.drafts, 3) << "at most one preview per denoise step";
  EXPECT_EQ(st.content, "Hello from the script.");
  EXPECT_TRUE(st.done);
  const SseStream raw = parse_sse(r->body);
  for (const json& c : raw.chunks)
    if (c.contains("diffgemma_draft")) {
      EXPECT_EQ(c["diffgemma_draft"]["block"], 0);
      EXPECT_NE(c["diffgemma_draft"]["text"].get<std::string>().find("Hello from the script."), std::string::npos);
    }
}

TEST(ServerScripted, CompletionsEndAtTheStopToken) {
  TestServer s({}, true);
  auto r = s.post("/v1/completions", {{"prompt", "Say hello"}, {"max_tokens", 64}, {"steps", 2}});
  ASSERT_TRUE(r);
  const json j = json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["text"], "Hello from the script.");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
}

// A call the model wrote malformed is not an empty answer that "stopped": its text reaches the content (plain and
// streamed), the error names what is wrong, and the finish reason says it. (With the tool check off: a repair would
// let the script write its next reply; server_tool_check_test.cpp covers that.)
TEST(ServerScripted, AMalformedToolCallComesBackAsTextWithItsOwnFinishReason) {
  TestServer s({}, true);
  const json req = chat_request("a broken call please", {{"tools", kTools}, {"max_tokens", 64}, {"tool_check", "off"}});
  auto r = s.post("/v1/chat/completions", req);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  const json& m = j["choices"][0]["message"];
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_call_error") << j;
  EXPECT_EQ(m["content"], "Let me check.call:get_weather{city \"Paris\"}") << j;
  EXPECT_FALSE(m.contains("tool_calls")) << j;
  ASSERT_EQ(m["diffgemma_tool_call_errors"].size(), 1u) << j;
  EXPECT_FALSE(m["diffgemma_tool_call_errors"][0]["message"].get<std::string>().empty());

  json sreq = req;
  sreq["stream"] = true;
  auto rs = s.post("/v1/chat/completions", sreq);
  ASSERT_TRUE(rs);
  const Streamed st = collect(rs->body);
  EXPECT_TRUE(st.done);
  EXPECT_EQ(st.content, m["content"]) << "the stream carries the same text";
  EXPECT_EQ(st.finish, "tool_call_error");
}

TEST(ServerScripted, CompletionsNeverReturnPadText) {
  TestServer s({}, true);
  for (const bool stream : {false, true}) {
    auto r = s.post("/v1/completions",
                    {{"prompt", "Some pads please"}, {"max_tokens", 64}, {"steps", 2}, {"stream", stream}});
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    std::string text;
    if (stream) {
      for (const json& c : parse_sse(r->body).chunks)
        if (!c["choices"].empty()) text += c["choices"][0]["text"].get<std::string>();
    } else {
      text = json::parse(r->body)["choices"][0]["text"];
    }
    EXPECT_EQ(text, "Hello there, friend.") << (stream ? "streamed" : "plain");
  }
}

}  // namespace server_scripted_test
}  // namespace dg::test
