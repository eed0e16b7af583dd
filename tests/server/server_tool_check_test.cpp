// Tool calls checked in serve (engine/tool_repair.h): on scripted replies, a call that fails the declared schema is
// repaired before the client sees it (plain and streamed), a repair that fails ends with finish "tool_call_error"
// and the calls as text and errors, the mode is the request's (`tool_check`, `tool_attempts`) or the server's, and a
// strict tool's schema must be one the engine supports. On the embedded model, its calculator call (the expression
// written as a string, declared an integer) is repaired into a text answer, recorded in the op-log and replayed;
// retried, it fails; the batched worker answers as the serial one.
#include <gtest/gtest.h>

#include <fstream>
#include <future>

#include "engine/oplog.h"
#include "server_test_util.h"
#include "support/paths.h"

namespace dg::test {
namespace server_tool_check_test {

const json kTools = weather_tools();

json tool_request(const std::string& user, const json& extra = json::object()) {
  json r = chat_request(user, {{"tools", kTools}, {"max_tokens", 64}});
  for (auto it = extra.begin(); it != extra.end(); ++it) r[it.key()] = it.value();
  return r;
}

json choice_of(const httplib::Result& r) {
  EXPECT_TRUE(r);
  if (!r) return json();
  EXPECT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  json c = j["choices"][0];
  c["usage"] = j["usage"];
  return c;
}

int attempts_of(const json& choice) { return choice["usage"].value("diffgemma_tool_attempts", 0); }

std::vector<json> oplog_records(const std::string& path, const std::string& op) {
  std::vector<json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line);
    if (j.value("op", "") == op) out.push_back(j);
  }
  return out;
}

TEST(ServerToolCheck, AnInvalidCallIsRepairedBeforeTheClientSeesIt) {
  server::ServerOptions o;
  o.log_dir = scratch_dir("oplog_tool_check");
  TestServer s(o, true);
  const json c = choice_of(s.post("/v1/chat/completions", tool_request("mend the call")));
  EXPECT_EQ(c["finish_reason"], "tool_calls") << c;
  ASSERT_EQ(c["message"]["tool_calls"].size(), 1u) << c;
  EXPECT_EQ(json::parse(c["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"city", "Paris"}}));
  EXPECT_FALSE(c["message"].contains("diffgemma_tool_call_errors")) << c;
  EXPECT_EQ(attempts_of(c), 1);

  auto st = s.post("/v1/chat/completions", tool_request("mend the call", {{"stream", true}}));
  ASSERT_TRUE(st);
  const SseStream sse = parse_sse(st->body);
  ASSERT_TRUE(sse.done) << st->body;
  json calls = json::array();
  std::string finish;
  for (const json& ch : sse.chunks) {
    if (ch["choices"].empty()) continue;
    EXPECT_FALSE(ch.contains("diffgemma_tool_call_errors")) << "the bad call never reaches the client";
    for (const json& tc : ch["choices"][0]["delta"].value("tool_calls", json::array())) calls.push_back(tc);
    if (!ch["choices"][0]["finish_reason"].is_null()) finish = ch["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(finish, "tool_calls");
  ASSERT_EQ(calls.size(), 1u) << sse.raw;
  EXPECT_EQ(json::parse(calls[0]["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));

  // Off: the call is handed on as the model wrote it.
  const json off = choice_of(s.post("/v1/chat/completions", tool_request("mend the call",
                                                                         {{"tool_check", "off"}})));
  ASSERT_EQ(off["message"]["tool_calls"].size(), 1u) << off;
  EXPECT_EQ(json::parse(off["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"town", "Paris"}}));
  EXPECT_EQ(attempts_of(off), 0);

  // The op-log: each repaired job's decisions as notes, and its generations under the job's number.
  const std::vector<json> notes = oplog_records(s.srv->oplog_path(), "note");
  ASSERT_EQ(notes.size(), 4u);  // repair + valid, twice
  EXPECT_EQ(notes[0]["outcome"], "repair");
  EXPECT_NE(notes[0]["problems"][0]["message"].get<std::string>().find("city"), std::string::npos) << notes[0];
  EXPECT_EQ(notes[1]["outcome"], "valid");
  const std::vector<json> gens = oplog_records(s.srv->oplog_path(), "generate");
  ASSERT_EQ(gens.size(), 5u);
  EXPECT_EQ(gens[0]["job"], gens[1]["job"]);
}

TEST(ServerToolCheck, AFailedRepairEndsWithToolCallErrorAndTheCallsAsText) {
  TestServer s({}, true);
  for (const std::string mode : {"repair", "retry"}) {
    const json c = choice_of(s.post("/v1/chat/completions", tool_request("stubborn call",
                                                                         {{"tool_check", mode}})));
    EXPECT_EQ(c["finish_reason"], "tool_call_error") << mode << ": " << c;
    EXPECT_FALSE(c["message"].contains("tool_calls")) << c;
    EXPECT_EQ(c["message"]["content"], "call:get_weather{town:\"Paris\"}") << c;
    ASSERT_EQ(c["message"]["diffgemma_tool_call_errors"].size(), 1u) << c;
    EXPECT_NE(c["message"]["diffgemma_tool_call_errors"][0]["message"].get<std::string>().find("city"),
              std::string::npos) << c;
    EXPECT_EQ(attempts_of(c), 2) << mode;
  }
  const json one = choice_of(s.post("/v1/chat/completions", tool_request("stubborn call",
                                                                         {{"tool_attempts", 1}, {"stream", false}})));
  EXPECT_EQ(one["finish_reason"], "tool_call_error");
  EXPECT_EQ(attempts_of(one), 1);

  auto st = s.post("/v1/chat/completions", tool_request("stubborn call", {{"stream", true}}));
  ASSERT_TRUE(st);
  const SseStream sse = parse_sse(st->body);
  ASSERT_TRUE(sse.done) << st->body;
  std::string finish;
  int errors = 0;
  for (const json& ch : sse.chunks) {
    if (ch.contains("diffgemma_tool_call_errors")) ++errors;
    if (ch["choices"].empty()) continue;
    EXPECT_FALSE(ch["choices"][0]["delta"].contains("tool_calls")) << "nothing that can be run";
    if (!ch["choices"][0]["finish_reason"].is_null()) finish = ch["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(finish, "tool_call_error");
  EXPECT_EQ(errors, 1);
}

TEST(ServerToolCheck, TheModeIsTheRequestsElseTheServersAndIsChecked) {
  server::ServerOptions o;
  o.tool_check.mode = ToolCheckMode::kOff;
  TestServer s(o, true);
  const json off = choice_of(s.post("/v1/chat/completions", tool_request("mend the call")));
  EXPECT_EQ(json::parse(off["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"town", "Paris"}}));
  const json on = choice_of(s.post("/v1/chat/completions", tool_request("mend the call",
                                                                        {{"tool_check", "repair"}})));
  EXPECT_EQ(json::parse(on["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"city", "Paris"}}));
  for (const auto& [field, value] : std::vector<std::pair<std::string, json>>{
           {"tool_check", "fix"}, {"tool_check", 1}, {"tool_attempts", 17}, {"tool_attempts", -1}}) {
    auto r = s.post("/v1/chat/completions", tool_request("mend the call", {{field, value}}));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_EQ(json::parse(r->body)["error"]["param"], field) << r->body;
  }
}

// A strict function's schema must be one the check fully understands; a non-strict one with an unsupported keyword is
// checked by name only (its call is handed on).
TEST(ServerToolCheck, StrictToolsNeedASupportedSchema) {
  TestServer s({}, true);
  json tools = kTools;
  tools[0]["function"]["parameters"]["properties"]["city"]["pattern"] = "^[A-Z]";
  const json loose = choice_of(s.post("/v1/chat/completions", tool_request("mend the call",
                                                                           {{"tools", tools}})));
  EXPECT_EQ(json::parse(loose["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            json({{"town", "Paris"}}));
  tools[0]["function"]["strict"] = true;
  auto r = s.post("/v1/chat/completions", tool_request("mend the call", {{"tools", tools}}));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  const json e = json::parse(r->body)["error"];
  EXPECT_EQ(e["param"], "tools");
  EXPECT_NE(e["message"].get<std::string>().find(
                "tools[0].function.parameters.properties.city.pattern: unsupported JSON Schema keyword 'pattern'"),
            std::string::npos) << r->body;
  tools[0]["function"]["strict"] = "yes";
  r = s.post("/v1/chat/completions", tool_request("mend the call", {{"tools", tools}}));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  // The Responses API's function tools carry strict at their top level.
  r = s.post("/v1/responses",
             {{"input", "mend the call"},
              {"tools", json::array({{{"type", "function"}, {"name", "get_weather"}, {"strict", true},
                                      {"parameters", tools[0]["function"]["parameters"]}}})}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("'pattern'"), std::string::npos) << r->body;
}

// The embedded model's calculator call passes the expression as a string; declared an integer, the call fails the
// check. Repaired (the default), the model answers in text instead; the repair is in the op-log and replays.
// Retried, every attempt writes the same kind of call: finish tool_call_error. docs/TOOLS.md has the rates.
const json kIntegerCalculator = json::parse(R"([{"type":"function","function":{"name":"calculator",
    "description":"Evaluates an arithmetic expression and returns the result.","parameters":{"type":"object",
    "required":["expression"],"properties":{"expression":{"type":"integer"}}}}}])");

json calculator_request(const std::string& mode) {
  return {{"messages", json::array({{{"role", "user"}, {"content", "What is 347 times 29?"}}})},
          {"tools", kIntegerCalculator},
          {"seed", 1},
          {"steps", 4},
          {"max_tokens", 32},
          {"tool_check", mode}};
}

TEST(ServerToolCheck, EmbeddedModelCalculatorCallIsRepairedAndReplays) {
  server::ServerOptions o;
  o.log_dir = scratch_dir("oplog_tool_repair");
  std::string log;
  json repaired;
  {
    TestServer s(o);
    repaired = choice_of(s.post("/v1/chat/completions", calculator_request("repair")));
    EXPECT_EQ(repaired["finish_reason"], "stop") << repaired;
    EXPECT_FALSE(repaired["message"].contains("tool_calls")) << repaired;
    EXPECT_GE(attempts_of(repaired), 1) << repaired;

    const json retried = choice_of(s.post("/v1/chat/completions", calculator_request("retry")));
    EXPECT_EQ(retried["finish_reason"], "tool_call_error") << retried;
    ASSERT_FALSE(retried["message"]["diffgemma_tool_call_errors"].empty()) << retried;
    EXPECT_NE(retried["message"]["diffgemma_tool_call_errors"][0]["message"].get<std::string>().find(
                  "expected an integer, got a string"),
              std::string::npos) << retried;
    EXPECT_EQ(attempts_of(retried), 2);
    log = s.srv->oplog_path();
  }
  const std::vector<json> notes = oplog_records(log, "note");
  ASSERT_FALSE(notes.empty());
  EXPECT_EQ(notes[0]["outcome"], "repair");
  const ReplayReport r = replay_oplog(tiny_server_engine(), log);
  EXPECT_FALSE(r.diverged) << r.divergence;
  EXPECT_EQ(r.jobs, 1 + attempts_of(repaired) + 3);

  server::ServerOptions b;
  b.max_batch = 2;
  TestServer batched(b);
  std::vector<std::future<httplib::Result>> futs;
  for (const char* mode : {"repair", "off"})
    futs.push_back(std::async(std::launch::async, [&, mode] {
      return batched.post("/v1/chat/completions", calculator_request(mode));
    }));
  const json again = choice_of(futs[0].get());
  EXPECT_EQ(again["message"], repaired["message"]);
  EXPECT_EQ(attempts_of(again), attempts_of(repaired));
  const json off = choice_of(futs[1].get());
  EXPECT_EQ(off["finish_reason"], "tool_calls") << off << " (off: the invalid call is handed on)";
}

}  // namespace server_tool_check_test
}  // namespace dg::test
