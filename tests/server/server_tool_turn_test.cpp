// Tool-turn continuation in serve (chat/tool_turn.h): after a reply that calls tools, the slot keeps the reply as the
// model wrote it (reasoning included); the request that brings the results, from a client that echoes the call
// without its reasoning, is prompted with that raw log plus the results, so the cache is only extended. Measured
// against the same exchange with continuation off (--no-tool-continuation), which re-renders the client's echo; on
// the embedded model through the batched worker.
#include <gtest/gtest.h>

#include <fstream>

#include "engine/oplog.h"
#include "server_test_util.h"
#include "support/paths.h"

namespace dg::test {
namespace server_tool_turn_test {

const json kTools = weather_tools();

struct Round {
  json first, second;  // the answers: the call, then the reply to its result
  std::vector<std::string> routes;  // the op-log's routing decisions
};

Round tool_round(bool continuation) {
  server::ServerOptions o;
  o.tool_continuation = continuation;
  o.log_dir = scratch_dir(continuation ? "oplog_tool_turn_on" : "oplog_tool_turn_off");
  Round out;
  TestServer s(o, true);
  const json user = {{"role", "user"}, {"content", "What's the weather in Paris?"}};
  json req = {{"messages", json::array({user})}, {"tools", kTools}, {"thinking", true}, {"max_tokens", 64}};
  auto r = s.post("/v1/chat/completions", req);
  EXPECT_TRUE(r && r->status == 200);
  if (!r) return out;
  out.first = json::parse(r->body);
  const json& m = out.first["choices"][0]["message"];
  EXPECT_FALSE(m["reasoning_content"].get<std::string>().empty());
  // The client echoes the call without the reasoning (as most do), then the result.
  req["messages"].push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", m["tool_calls"]}});
  req["messages"].push_back({{"role", "tool"}, {"tool_call_id", m["tool_calls"][0]["id"]}, {"content", "18 C"}});
  r = s.post("/v1/chat/completions", req);
  EXPECT_TRUE(r && r->status == 200);
  if (!r) return out;
  out.second = json::parse(r->body);
  std::ifstream in(s.srv->oplog_path());
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line);
    if (j.value("op", "") == "route") out.routes.push_back(j["why"]);
  }
  return out;
}

TEST(ServerToolTurn, TheNextRoundExtendsTheRawTurnInsteadOfReRendering) {
  const Round on = tool_round(true), off = tool_round(false);
  for (const Round* r : {&on, &off}) {
    EXPECT_EQ(r->first["choices"][0]["finish_reason"], "tool_calls");
    const json& m = r->second["choices"][0]["message"];  // thinking: the prompt opened the thought channel
    EXPECT_EQ(m.value("reasoning_content", "") + m["content"].get<std::string>(), "It is 18 C in Paris.") << m;
  }
  const json& u_on = on.second["usage"];
  const json& u_off = off.second["usage"];
  const int64_t p_on = u_on["prompt_tokens"], c_on = u_on["prompt_tokens_details"]["cached_tokens"];
  const int64_t p_off = u_off["prompt_tokens"], c_off = u_off["prompt_tokens_details"]["cached_tokens"];
  std::printf("tool-turn continuation: next round %lld prompt tokens, %lld reused (%.0f %%); re-rendered: %lld, %lld "
              "reused (%.0f %%)\n", static_cast<long long>(p_on), static_cast<long long>(c_on), 100.0 * c_on / p_on,
              static_cast<long long>(p_off), static_cast<long long>(c_off), 100.0 * c_off / p_off);
  // On: every token of the first answer's prompt and reply stays; only the result (and the reopened thought
  // channel) is new. Off: the reply is rewound and the client's echo re-encoded, without the reasoning.
  const int64_t first_prompt = on.first["usage"]["prompt_tokens"];
  const int64_t first_reply = on.first["usage"]["completion_tokens"];
  EXPECT_GT(c_on, first_prompt + first_reply / 2) << u_on;
  EXPECT_GT(p_on, p_off) << "the raw turn keeps the reasoning the re-render drops";
  EXPECT_LT(c_off, c_on);
  EXPECT_EQ(on.routes, (std::vector<std::string>{"empty", "tool_turn"}));
  EXPECT_EQ(off.routes, (std::vector<std::string>{"empty", "prefix"}));
}

// The batched worker on the embedded model: its calculator call ends on <|tool_response>, and the request that
// brings the result is routed to that slot and reuses the whole raw turn; the op-log replays both rounds.
TEST(ServerToolTurn, TheBatchedWorkerContinuesATurnOfTheEmbeddedModel) {
  const json tools = json::parse(R"([{"type":"function","function":{"name":"calculator",
      "description":"Evaluates an arithmetic expression and returns the result.","parameters":{"type":"object",
      "required":["expression"],"properties":{"expression":{"type":"string"}}}}}])");
  server::ServerOptions o;
  o.max_batch = 2;
  o.log_dir = scratch_dir("oplog_tool_turn_batched");
  std::string log;
  json first, second;
  {
    TestServer s(o);
    json req = {{"messages", json::array({{{"role", "user"}, {"content", "What is 347 times 29?"}}})},
                {"tools", tools}, {"seed", 1}, {"steps", 4}, {"max_tokens", 32}};
    auto r = s.post("/v1/chat/completions", req);
    ASSERT_TRUE(r && r->status == 200);
    first = json::parse(r->body);
    const json& m = first["choices"][0]["message"];
    ASSERT_EQ(first["choices"][0]["finish_reason"], "tool_calls") << first;
    req["messages"].push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", m["tool_calls"]}});
    req["messages"].push_back({{"role", "tool"}, {"tool_call_id", m["tool_calls"][0]["id"]}, {"content", "10063"}});
    r = s.post("/v1/chat/completions", req);
    ASSERT_TRUE(r && r->status == 200);
    second = json::parse(r->body);
    log = s.srv->oplog_path();
  }
  EXPECT_EQ(second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(),
            first["usage"]["prompt_tokens"].get<int64_t>() + first["usage"]["completion_tokens"].get<int64_t>() + 1)
      << second["usage"];
  std::vector<std::string> routes;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);)
    if (const json j = json::parse(line); j.value("op", "") == "route") routes.push_back(j["why"]);
  EXPECT_EQ(routes, (std::vector<std::string>{"empty", "tool_turn"}));
  const ReplayReport rep = replay_oplog(tiny_server_engine(), log);
  EXPECT_FALSE(rep.diverged) << rep.divergence;
}

}  // namespace server_tool_turn_test
}  // namespace dg::test
