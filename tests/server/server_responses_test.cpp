// OpenAI compatibility that real clients hit (scripted replies): POST /v1/responses (text, reasoning and function
// calls; the streamed events in the order the SDKs accumulate them; the round trip with a function_call_output),
// GET /v1/models/{id}, sampling fields the sampler has no counterpart for reported by name, request ids that do not
// repeat (X-Request-Id). The npm client test drives the same through the official SDK.
#include <gtest/gtest.h>

#include <set>

#include "server_test_util.h"

namespace dg::test {
namespace server_responses_test {

constexpr const char* kResponses = "/v1/responses";
const json kCity = {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}};
const json kTools = json::array({{{"type", "function"}, {"name", "get_weather"}, {"parameters", kCity}}});

// The events of a Responses stream: (type, data), in order.
std::vector<std::pair<std::string, json>> events_of(const std::string& body) {
  std::vector<std::pair<std::string, json>> out;
  for (size_t at = 0, end; at < body.size(); at = end + 2) {
    end = body.find("\n\n", at);
    if (end == std::string::npos) end = body.size();
    const std::string ev = body.substr(at, end - at);
    if (ev.rfind("event: ", 0) != 0) continue;
    const size_t nl = ev.find('\n');
    out.emplace_back(ev.substr(7, nl - 7), json::parse(ev.substr(nl + 7)));
  }
  return out;
}

TEST(ServerResponses, TextReasoningAndFunctionCallsAsOutputItems) {
  TestServer s({}, true);
  auto r = s.post(kResponses, {{"input", "Say hello"}, {"max_output_tokens", 32}, {"instructions", "Be nice."}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "response");
  EXPECT_EQ(j["status"], "completed");
  EXPECT_EQ(j["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(r->get_header_value("X-Request-Id"), j["id"]);
  EXPECT_EQ(j["instructions"], "Be nice.");
  ASSERT_EQ(j["output"].size(), 1u) << j;
  EXPECT_EQ(j["output"][0]["type"], "message");
  EXPECT_EQ(j["output"][0]["content"][0]["type"], "output_text");
  EXPECT_EQ(j["output"][0]["content"][0]["text"], "Hello from the script.");
  EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["input_tokens"].get<int>() + j["usage"]["output_tokens"].get<int>());

  r = s.post(kResponses, {{"input", json::array({{{"role", "user"},
                                                   {"content", json::array({{{"type", "input_text"},
                                                                             {"text", "weather in Paris?"}}})}}})},
                          {"tools", kTools}, {"max_output_tokens", 64}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  j = json::parse(r->body);
  ASSERT_EQ(j["output"].size(), 2u) << j;
  EXPECT_EQ(j["output"][0]["type"], "reasoning");
  EXPECT_EQ(j["output"][0]["content"][0]["text"], "The user wants the weather; I will call the tool.");
  const json call = j["output"][1];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(json::parse(call["arguments"].get<std::string>()), json({{"city", "Paris"}}));

  // The round trip: the output items go back as input with the call's output; the turn continues from the cache.
  json input = json::array({{{"role", "user"}, {"content", "weather in Paris?"}}});
  for (const json& o : j["output"]) input.push_back(o);
  input.push_back({{"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "18 C"}});
  r = s.post(kResponses, {{"input", input}, {"tools", kTools}, {"max_output_tokens", 64}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  j = json::parse(r->body);
  EXPECT_EQ(j["output"].back()["content"][0]["text"], "It is 18 C in Paris.") << j;
  EXPECT_GT(j["usage"]["input_tokens_details"]["cached_tokens"].get<int>(), 10) << j;
}

TEST(ServerResponses, TheStreamIsTheEventsTheSdksAccumulate) {
  TestServer s({}, true);
  auto r = s.post(kResponses, {{"input", "weather?"}, {"tools", kTools}, {"max_output_tokens", 64}, {"stream", true}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->body.find("[DONE]"), std::string::npos);
  const auto ev = events_of(r->body);
  ASSERT_GE(ev.size(), 6u) << r->body;
  std::vector<std::string> types;
  for (size_t i = 0; i < ev.size(); ++i) {
    types.push_back(ev[i].first);
    EXPECT_EQ(ev[i].second["type"], ev[i].first);
    EXPECT_EQ(ev[i].second["sequence_number"], i);
  }
  EXPECT_EQ(types.front(), "response.created");
  EXPECT_EQ(types[1], "response.in_progress");
  EXPECT_EQ(types.back(), "response.completed");
  // Each item: added, its parts and deltas, done; the final response holds every item with the streamed text.
  std::string reasoning;
  json args;
  for (const auto& [type, d] : ev) {
    if (type == "response.reasoning_text.delta") reasoning += d["delta"].get<std::string>();
    if (type == "response.function_call_arguments.done") args = json::parse(d["arguments"].get<std::string>());
  }
  EXPECT_EQ(reasoning, "The user wants the weather; I will call the tool.");
  EXPECT_EQ(args, json({{"city", "Paris"}}));
  const std::vector<std::string> expected = {
      "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"};
  EXPECT_EQ(std::vector<std::string>(types.begin(), types.begin() + 4), expected);
  const json final = ev.back().second["response"];
  ASSERT_EQ(final["output"].size(), 2u) << final;
  EXPECT_EQ(final["output"][0]["content"][0]["text"], reasoning);
  EXPECT_EQ(final["output"][1]["type"], "function_call");
  for (const auto& [type, d] : ev)
    if (type == "response.output_item.done") {
      EXPECT_EQ(d["item"]["id"], final["output"][d["output_index"].get<size_t>()]["id"]);
    }
}

TEST(ServerResponses, WhatItCannotTakeIsRefusedByName) {
  TestServer s({}, true);
  const auto refusal = [&](const json& body) {
    auto r = s.post(kResponses, body);
    return r ? std::to_string(r->status) + " " + r->body : std::string("no answer");
  };
  std::string e = refusal({{"input", "x"}, {"previous_response_id", "resp_1"}});
  EXPECT_EQ(e.rfind("400", 0), 0u) << e;
  EXPECT_NE(e.find("stores no responses"), std::string::npos) << e;
  e = refusal({{"input", json::array({{{"role", "user"},
                                       {"content", json::array({{{"type", "input_image"}, {"image_url", "x"}}})}}})}});
  EXPECT_EQ(e.rfind("400", 0), 0u) << e;
  EXPECT_NE(e.find("'input_image' part: this model reads text only"), std::string::npos) << e;
  e = refusal({{"input", "x"}, {"tools", json::array({{{"type", "web_search"}}})}});
  EXPECT_EQ(e.rfind("400", 0), 0u) << e;
  EXPECT_NE(e.find("only function tools"), std::string::npos) << e;
  EXPECT_EQ(refusal({{"input", "x"}, {"max_output_tokens", 0}}).rfind("400", 0), 0u);
}

TEST(ServerCompat, ModelsById) {
  TestServer s({}, true);
  auto c = s.client();
  auto r = c.Get("/v1/models/dg-tiny");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["id"], "dg-tiny");
  EXPECT_EQ(json::parse(r->body)["object"], "model");
  r = c.Get("/v1/models/gpt-4o");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "model_not_found");
}

// The SDKs percent-encode the id in the path (openai-node's models.retrieve sends a '/' as %2F): an id named as
// Hugging Face names models is found either way; a malformed escape is a plain 404.
TEST(ServerCompat, ModelsByPercentEncodedId) {
  server::ServerOptions o;
  o.model_id = "google/diffusiongemma 26B";
  TestServer s(o, true);
  auto c = s.client();
  for (const char* path : {"/v1/models/google%2Fdiffusiongemma%2026B", "/v1/models/google%2fdiffusiongemma%2026B",
                           "/v1/models/google/diffusiongemma%2026B"}) {
    auto r = c.Get(path);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << path << ": " << r->body;
    EXPECT_EQ(json::parse(r->body)["id"], "google/diffusiongemma 26B");
  }
  for (const char* path : {"/v1/models/google%2Fdiffusiongemma%2", "/v1/models/google%zzdiffusiongemma%2026B"}) {
    auto r = c.Get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404) << path;
  }
}

// temperature and top_p have no counterpart in the entropy-bound sampler: the answer names them, plain, streamed,
// and in a header.
TEST(ServerCompat, SamplingFieldsTheSamplerDoesNotUseAreReported) {
  TestServer s({}, true);
  auto r = s.post("/v1/chat/completions", chat_request("hi", {{"temperature", 0.2}, {"top_p", 0.9}}));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["diffgemma_ignored_fields"], json({"temperature", "top_p"}));
  EXPECT_EQ(r->get_header_value("X-Diffgemma-Ignored-Fields"), "temperature, top_p");
  r = s.post("/v1/chat/completions", chat_request("hi", {{"temperature", 0.2}, {"stream", true}}));
  ASSERT_TRUE(r);
  EXPECT_EQ(parse_sse(r->body).chunks.at(0)["diffgemma_ignored_fields"], json({"temperature"}));
  r = s.post("/v1/chat/completions", chat_request("hi"));
  ASSERT_TRUE(r);
  EXPECT_FALSE(json::parse(r->body).contains("diffgemma_ignored_fields"));
  EXPECT_FALSE(r->has_header("X-Diffgemma-Ignored-Fields"));
}

TEST(ServerCompat, RequestIdsDoNotRepeat) {
  std::set<std::string> ids;
  for (int server = 0; server < 2; ++server) {
    TestServer s({}, true);
    for (int i = 0; i < 5; ++i) {
      auto r = s.post("/v1/chat/completions", chat_request("hi"));
      ASSERT_TRUE(r);
      const std::string id = json::parse(r->body)["id"];
      EXPECT_EQ(r->get_header_value("X-Request-Id"), id);
      EXPECT_GE(id.size(), std::string("chatcmpl-").size() + 16 + 1) << "64 random bits per process: " << id;
      EXPECT_TRUE(ids.insert(id).second) << "repeated: " << id;
    }
  }
}

}  // namespace server_responses_test
}  // namespace dg::test
