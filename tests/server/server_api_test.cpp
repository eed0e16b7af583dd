// The server's endpoints on the embedded model (the protocol, not the words): health and models,
// chat and completions with and without streaming, the SSE shape (role chunk first, deltas, finish, usage, [DONE]),
// and prefix reuse across the turns of a conversation (the cached_tokens the usage reports).
#include <gtest/gtest.h>

#include "chat/template.h"
#include "server_test_util.h"

namespace dg::test {
namespace server_api_test {

TEST(ServerApi, HealthModelsAndMetricsAnswer) {
  TestServer s;
  auto c = s.client();
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(json::parse(h->body)["status"], "ok");
  auto m = c.Get("/v1/models");
  ASSERT_TRUE(m);
  const json models = json::parse(m->body);
  EXPECT_EQ(models["object"], "list");
  ASSERT_EQ(models["data"].size(), 1u);
  EXPECT_EQ(models["data"][0]["id"], "dg-tiny");
  EXPECT_EQ(models["data"][0]["object"], "model");
  std::string metrics = s.metrics();
  EXPECT_NE(metrics.find("# TYPE diffgemma_step_seconds histogram"), std::string::npos) << metrics;
  // A request is counted by the access logger, which httplib calls after the response went out: on a loaded
  // machine the next request can arrive first.
  const std::string health = "diffgemma_http_requests_total{route=\"/health\",status=\"200\"} 1";
  EXPECT_TRUE(eventually([&] { return (metrics = s.metrics()).find(health) != std::string::npos; })) << metrics;
}

// A method a route does not take is a 405 that lists the ones it does (Allow, RFC 9110 15.5.6); every GET route
// answers HEAD with the head alone.
TEST(ServerApi, AWrongMethodIs405WithAllowAndHeadAnswersEveryGetRoute) {
  TestServer s;
  auto c = s.client();
  const auto expect_405 = [](const httplib::Result& r, const std::string& allow) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 405) << r->body;
    EXPECT_EQ(r->get_header_value("Allow"), allow) << r->body;
    EXPECT_NE(json::parse(r->body)["error"]["message"].get<std::string>().find("accepts " + allow), std::string::npos)
        << r->body;
  };
  expect_405(c.Get("/v1/chat/completions"), "POST");
  expect_405(c.Delete("/v1/responses"), "POST");
  expect_405(c.Delete("/v1/models"), "GET, HEAD");
  expect_405(c.Post("/v1/models/dg-tiny", "{}", "application/json"), "GET, HEAD");
  expect_405(c.Put("/metrics", "", "text/plain"), "GET, HEAD");
  expect_405(c.Post("/health", "", "text/plain"), "GET, HEAD");
  for (const char* path : {"/health", "/v1/models", "/v1/models/dg-tiny", "/metrics"}) {
    auto h = c.Head(path);
    ASSERT_TRUE(h) << path;
    EXPECT_EQ(h->status, 200) << path;
    EXPECT_TRUE(h->body.empty()) << path;
  }
  auto none = c.Delete("/v1/nothing");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 404);
  EXPECT_FALSE(none->has_header("Allow"));
}

TEST(ServerApi, ChatCompletionHasTheOpenAiShape) {
  TestServer s;
  auto r = s.post("/v1/chat/completions", chat_request("Hello there"));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["model"], "dg-tiny");
  ASSERT_EQ(j["choices"].size(), 1u);
  const json& ch = j["choices"][0];
  EXPECT_EQ(ch["index"], 0);
  EXPECT_EQ(ch["message"]["role"], "assistant");
  EXPECT_TRUE(ch["message"]["content"].is_string());
  EXPECT_TRUE(ch["finish_reason"] == "stop" || ch["finish_reason"] == "length") << ch;
  const json& u = j["usage"];
  EXPECT_GT(u["prompt_tokens"].get<int>(), 5);
  EXPECT_LE(u["completion_tokens"].get<int>(), 8);
  EXPECT_EQ(u["total_tokens"], u["prompt_tokens"].get<int>() + u["completion_tokens"].get<int>());
  EXPECT_EQ(u["prompt_tokens_details"]["cached_tokens"], 0);
}

TEST(ServerApi, ChatStreamSendsRoleDeltasFinishUsageAndDone) {
  TestServer s;
  auto r = s.post("/v1/chat/completions",
                  chat_request("Stream this", {{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const SseStream st = parse_sse(r->body);
  ASSERT_TRUE(st.error.empty()) << st.error << "\n" << st.raw;
  ASSERT_TRUE(st.done) << st.raw;
  ASSERT_GE(st.chunks.size(), 3u);
  EXPECT_EQ(st.chunks[0]["choices"][0]["delta"]["role"], "assistant");
  std::string id = st.chunks[0]["id"];
  std::string finish;
  int finishes = 0;
  for (size_t i = 0; i + 1 < st.chunks.size(); ++i) {
    const json& c = st.chunks[i];
    EXPECT_EQ(c["id"], id);
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    ASSERT_EQ(c["choices"].size(), 1u);
    const json& d = c["choices"][0]["delta"];
    EXPECT_FALSE(d.contains("tool_calls")) << "no tools are declared here";
    if (!c["choices"][0]["finish_reason"].is_null()) {
      finish = c["choices"][0]["finish_reason"];
      ++finishes;
    }
  }
  EXPECT_EQ(finishes, 1);
  EXPECT_TRUE(finish == "stop" || finish == "length") << finish;
  const json& last = st.chunks.back();
  EXPECT_TRUE(last["choices"].empty());
  EXPECT_LE(last["usage"]["completion_tokens"].get<int>(), 8);
  EXPECT_GT(last["usage"]["prompt_tokens"].get<int>(), 0);
}

TEST(ServerApi, StreamingAndNonStreamingAgreeForTheSameSeedAndCache) {
  // Two fresh servers, one request each: the same seed on the same cache state gives the same answer.
  TestServer a, b;
  auto plain = a.post("/v1/chat/completions", chat_request("Same seed", {{"max_tokens", 12}}));
  auto streamed = b.post("/v1/chat/completions", chat_request("Same seed", {{"max_tokens", 12}, {"stream", true}}));
  ASSERT_TRUE(plain && streamed);
  ASSERT_EQ(plain->status, 200);
  const json j = json::parse(plain->body);
  std::string text;
  for (const json& c : parse_sse(streamed->body).chunks)
    if (!c["choices"].empty() && c["choices"][0]["delta"].contains("content"))
      text += c["choices"][0]["delta"]["content"].get<std::string>();
  EXPECT_EQ(text, j["choices"][0]["message"]["content"].get<std::string>());
}

TEST(ServerApi, CompletionsStreamAndNot) {
  TestServer s;
  const json body = {{"prompt", "The sky is"}, {"max_tokens", 6}, {"steps", 2}, {"seed", 3}};
  auto r = s.post("/v1/completions", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_TRUE(j["choices"][0]["text"].is_string());
  EXPECT_LE(j["usage"]["completion_tokens"].get<int>(), 6);
  json sb = body;
  sb["stream"] = true;
  auto rs = s.post("/v1/completions", sb);
  ASSERT_TRUE(rs);
  const SseStream st = parse_sse(rs->body);
  ASSERT_TRUE(st.error.empty() && st.done) << st.raw;
  int finishes = 0;
  for (const json& c : st.chunks) {
    EXPECT_EQ(c["object"], "text_completion");
    if (!c["choices"][0]["finish_reason"].is_null()) ++finishes;
  }
  EXPECT_EQ(finishes, 1);
  auto ids = s.post("/v1/completions", {{"prompt", json::array({2, 105, 2364})}, {"max_tokens", 4}, {"steps", 2}});
  ASSERT_TRUE(ids);
  EXPECT_EQ(ids->status, 200) << ids->body;
}

TEST(ServerApi, ANextTurnReusesTheWholeConversationFromTheCache) {
  TestServer s;
  json req = chat_request("First question");
  auto r1 = s.post("/v1/chat/completions", req);
  ASSERT_TRUE(r1);
  ASSERT_EQ(r1->status, 200) << r1->body;
  const json a1 = json::parse(r1->body);
  json msgs = req["messages"];
  msgs.push_back(a1["choices"][0]["message"]);
  msgs.push_back({{"role", "user"}, {"content", "Second question"}});
  req["messages"] = msgs;
  auto r2 = s.post("/v1/chat/completions", req);
  ASSERT_TRUE(r2);
  ASSERT_EQ(r2->status, 200) << r2->body;
  const json a2 = json::parse(r2->body);

  // The cache held the canonical render of turn 1 (answer included, turn closed): turn 2 reuses all of it.
  Conversation conv;
  for (size_t i = 0; i + 1 < msgs.size(); ++i) conv.messages.push_back(message_from_json(msgs[i], "m"));
  RenderOptions ro;
  ro.add_generation_prompt = false;
  const Tokenizer& tok = tiny_server_engine().tokenizer();
  const auto canonical = render_chat(conv, ro, tok, ChatTokens::from(tok)).ids;
  EXPECT_EQ(a2["usage"]["prompt_tokens_details"]["cached_tokens"].get<size_t>(), canonical.size()) << a2;
  EXPECT_GT(a2["usage"]["prompt_tokens"].get<size_t>(), canonical.size());
  EXPECT_EQ(s.metric("diffgemma_prompt_tokens_cached_total"), static_cast<double>(canonical.size()));
}

}  // namespace server_api_test
}  // namespace dg::test
