// Strict tools through `serve` on the embedded model (tools[i].function.strict; the Responses API's strict): its
// calculator calls, which write the expression as a string, are constrained while the canvas is denoised, so the
// client gets calls whose arguments parse and validate against the declared schema (an integer; a nested object with
// an enum and an array with bounds, every field required) with finish "tool_calls" and no repair, plain, streamed, through
// the Responses API, on the serial and the batched worker; the op-log replays the constraint.
#include <gtest/gtest.h>

#include <future>

#include "diffusion/json_schema.h"
#include "engine/oplog.h"
#include "server_test_util.h"
#include "support/paths.h"

namespace dg::test {
namespace server_strict_tools_test {

const json kInteger = json::parse(R"({"type":"object","properties":{"expression":{"type":"integer"}},
    "required":["expression"]})");
// A nested object with an enum and an array of integers with bounds, every field required, nothing else.
const json kRich = json::parse(R"({"type":"object","properties":{"expression":{"type":"object","properties":{
    "op":{"enum":["add","multiply"]},"operands":{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":3}},
    "required":["op","operands"],"additionalProperties":false}},"required":["expression"],"additionalProperties":false})");

json tools(const json& parameters, bool strict) {
  json f = {{"name", "calculator"},
            {"description", "Evaluates an arithmetic expression and returns the result."},
            {"parameters", parameters}};
  if (strict) f["strict"] = true;
  return json::array({{{"type", "function"}, {"function", f}}});
}

json calculator_request(const json& parameters, int seed, bool strict = true, const json& extra = json::object()) {
  json r = {{"messages", json::array({{{"role", "user"}, {"content", "What is 347 times 29?"}}})},
            {"tools", tools(parameters, strict)},
            {"seed", seed},
            {"steps", 4},
            {"max_tokens", 64}};
  for (auto it = extra.begin(); it != extra.end(); ++it) r[it.key()] = it.value();
  return r;
}

// The problems of the arguments against `parameters` (empty: valid).
std::vector<std::string> problems(const std::string& arguments, const json& parameters) {
  if (!json::accept(arguments)) return {"not JSON: " + arguments};
  return JsonSchema::compile(SchemaJson(parameters), "parameters", false)->validate(SchemaJson::parse(arguments));
}

// A chat completion's message, checked: one or more calls to the calculator whose arguments validate, no repair.
json valid_calls(const httplib::Result& r, const json& parameters) {
  EXPECT_TRUE(r);
  if (!r) return json();
  EXPECT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  const json& c = j["choices"][0];
  EXPECT_EQ(c["finish_reason"], "tool_calls") << c;
  EXPECT_FALSE(j["usage"].contains("diffgemma_tool_attempts")) << "no repair: " << j["usage"];
  EXPECT_FALSE(c["message"].contains("diffgemma_tool_call_errors")) << c;
  EXPECT_FALSE(c["message"].value("tool_calls", json::array()).empty()) << c;
  for (const json& call : c["message"].value("tool_calls", json::array())) {
    EXPECT_EQ(call["function"]["name"], "calculator");
    const auto p = problems(call["function"]["arguments"], parameters);
    EXPECT_TRUE(p.empty()) << call << ": " << p[0];
  }
  return c["message"];
}

TEST(ServerStrictTools, EmbeddedModelCallsValidateWithoutRepairAndReplay) {
  server::ServerOptions o;
  o.log_dir = scratch_dir("oplog_strict_tools");
  std::string log;
  json first;
  {
    TestServer s(o);
    for (int seed = 1; seed <= 3; ++seed) {
      const json m = valid_calls(s.post("/v1/chat/completions", calculator_request(kInteger, seed)), kInteger);
      if (seed == 1) first = m;
      // Without strict the same call fails the schema: the default check repairs it into a text answer.
      const json loose = json::parse(s.post("/v1/chat/completions", calculator_request(kInteger, seed, false))->body);
      EXPECT_GE(loose["usage"].value("diffgemma_tool_attempts", 0), 1) << loose;
    }
    valid_calls(s.post("/v1/chat/completions", calculator_request(kRich, 4, true, {{"tool_check", "off"}})), kRich);

    // Streamed: the call's arguments as the deltas carry them.
    auto st = s.post("/v1/chat/completions", calculator_request(kRich, 5, true, {{"stream", true}}));
    ASSERT_TRUE(st);
    const SseStream sse = parse_sse(st->body);
    ASSERT_TRUE(sse.done) << st->body;
    std::string args, finish;
    for (const json& ch : sse.chunks) {
      if (ch["choices"].empty()) continue;
      for (const json& tc : ch["choices"][0]["delta"].value("tool_calls", json::array()))
        if (tc.contains("function") && tc["function"].contains("arguments"))
          args += tc["function"]["arguments"].get<std::string>();
      if (!ch["choices"][0]["finish_reason"].is_null()) finish = ch["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(finish, "tool_calls");
    const auto p = problems(args, kRich);
    EXPECT_TRUE(p.empty()) << args << ": " << p[0];

    // The Responses API's function tools carry strict at their top level.
    const auto resp = s.post("/v1/responses", {{"input", "What is 347 times 29?"},
                                               {"tools", json::array({{{"type", "function"},
                                                                       {"name", "calculator"},
                                                                       {"strict", true},
                                                                       {"parameters", kInteger}}})},
                                               {"seed", 2},
                                               {"steps", 4},
                                               {"max_output_tokens", 64}});
    ASSERT_TRUE(resp);
    ASSERT_EQ(resp->status, 200) << resp->body;
    int calls = 0;
    const json body = json::parse(resp->body);
    for (const json& item : body["output"])
      if (item["type"] == "function_call") {
        ++calls;
        const auto q = problems(item["arguments"], kInteger);
        EXPECT_TRUE(q.empty()) << item << ": " << q[0];
      }
    EXPECT_GE(calls, 1) << resp->body;
    log = s.srv->oplog_path();
  }
  const ReplayReport r = replay_oplog(tiny_server_engine(), log);
  EXPECT_FALSE(r.diverged) << r.divergence;
  EXPECT_GE(r.jobs, 9);

  // The batched worker constrains the same rows.
  server::ServerOptions b;
  b.max_batch = 2;
  TestServer batched(b);
  std::vector<std::future<httplib::Result>> futs;
  for (int seed : {1, 4})
    futs.push_back(std::async(std::launch::async, [&, seed] {
      return batched.post("/v1/chat/completions", calculator_request(seed == 1 ? kInteger : kRich, seed));
    }));
  const json again = valid_calls(futs[0].get(), kInteger);
  ASSERT_EQ(again["tool_calls"].size(), first["tool_calls"].size()) << again;
  for (size_t i = 0; i < first["tool_calls"].size(); ++i)  // the same calls (call ids are per request)
    EXPECT_EQ(again["tool_calls"][i]["function"], first["tool_calls"][i]["function"]);
  valid_calls(futs[1].get(), kRich);
}

TEST(ServerStrictTools, AStrictToolsParametersMustBeAnObject) {
  TestServer s({}, true);
  auto r = s.post("/v1/chat/completions", calculator_request(json::parse(R"({"type":"array"})"), 1));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "tools") << r->body;
  EXPECT_NE(r->body.find("a strict tool's parameters must accept an object"), std::string::npos) << r->body;
}

}  // namespace server_strict_tools_test
}  // namespace dg::test
