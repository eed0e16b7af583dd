// response_format json_object: the answer content is one JSON object. On scripted replies (an object followed by
// prose, which is not JSON as written) plain and streamed, with the token budget cutting it (finish "length"), the
// refusals (json_schema, thinking, tools); on the embedded model the batched worker answers as the serial one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include "diffusion/json_grammar.h"
#include "engine/oplog.h"
#include "server_test_util.h"
#include "support/paths.h"

namespace dg::test {
namespace server_json_test {

const json kJson = {{"response_format", {{"type", "json_object"}}}, {"max_tokens", 64}};
const std::string kObject = R"({"city": "Paris", "temp": 18})";

json message_of(const httplib::Result& r) {
  EXPECT_TRUE(r);
  if (!r) return json();
  EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body)["choices"][0];
}

TEST(ServerJson, JsonObjectAnswersParse) {
  TestServer s({}, true);
  const json plain = message_of(s.post("/v1/chat/completions", chat_request("Reply in JSON", {{"max_tokens", 64}})));
  EXPECT_EQ(plain["message"]["content"], kObject + " Done.");
  EXPECT_FALSE(json::accept(plain["message"]["content"].get<std::string>())) << "the raw reply is not JSON";

  const json c = message_of(s.post("/v1/chat/completions", chat_request("Reply in JSON", kJson)));
  const std::string content = c["message"]["content"];
  ASSERT_TRUE(json::accept(content)) << content;
  EXPECT_EQ(json::parse(content), json({{"city", "Paris"}, {"temp", 18}}));
  EXPECT_EQ(content, kObject);
  EXPECT_EQ(c["finish_reason"], "stop");
}

TEST(ServerJson, StreamedJsonObjectAnswersParse) {
  TestServer s({}, true);
  json req = chat_request("Reply in JSON", kJson);
  req["stream"] = true;
  auto r = s.post("/v1/chat/completions", req);
  ASSERT_TRUE(r);
  const SseStream st = parse_sse(r->body);
  ASSERT_TRUE(st.error.empty()) << st.error;
  EXPECT_TRUE(st.done);
  std::string content, finish;
  for (const json& ch : st.chunks) {
    if (ch["choices"].empty()) continue;
    const json& d = ch["choices"][0]["delta"];
    if (d.contains("content")) content += d["content"].get<std::string>();
    if (!ch["choices"][0]["finish_reason"].is_null()) finish = ch["choices"][0]["finish_reason"];
  }
  ASSERT_TRUE(json::accept(content)) << content;
  EXPECT_EQ(content, kObject);
  EXPECT_EQ(finish, "stop");
}

TEST(ServerJson, TheTokenBudgetCutsTheObjectWithFinishLength) {
  TestServer s({}, true);
  json req = chat_request("Reply in JSON", kJson);
  req["max_tokens"] = 3;
  const json c = message_of(s.post("/v1/chat/completions", req));
  const std::string content = c["message"]["content"];
  EXPECT_EQ(c["finish_reason"], "length");
  EXPECT_FALSE(content.empty());
  EXPECT_EQ(kObject.rfind(content, 0), 0u) << "a prefix of the object: " << content;
  EXPECT_FALSE(json::accept(content));
}

TEST(ServerJson, JsonObjectRefusesSchemasThinkingAndTools) {
  TestServer s({}, true);
  const json tools = json::array({{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", json::object()}}}}});
  auto expect_400 = [&](const json& extra, const std::string& says) {
    auto r = s.post("/v1/chat/completions", chat_request("Reply in JSON", extra));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    const json e = json::parse(r->body)["error"];
    EXPECT_EQ(e["param"], "response_format") << r->body;
    EXPECT_NE(e["message"].get<std::string>().find(says), std::string::npos) << r->body;
  };
  expect_400({{"response_format", {{"type", "json_schema"}}}}, "json_schema");
  expect_400({{"response_format", {{"type", "json_object"}}}, {"thinking", true}}, "thinking");
  expect_400({{"response_format", {{"type", "json_object"}}}, {"tools", tools}}, "tools");
  json ok = kJson;
  ok["tools"] = tools;
  ok["tool_choice"] = "none";  // the tools are not shown: nothing to refuse
  EXPECT_EQ(message_of(s.post("/v1/chat/completions", chat_request("Reply in JSON", ok)))["message"]["content"],
            kObject);
}

// The real (tiny) model under JSON mode: every answer is a JSON prefix (an object when it stopped), and the
// batched worker, which reads logits rows from the batched forward's hidden states, answers as the serial one.
TEST(ServerJson, BatchedWorkerAnswersAsTheSerialOne) {
  constexpr size_t kN = 3;
  auto request = [](size_t i) {
    json r = chat_request(i == 0 ? "What is the capital of France?" : i == 1 ? "Name a colour." : "Count to five.",
                          {{"response_format", {{"type", "json_object"}}}, {"max_tokens", 48}, {"steps", 4},
                           {"seed", 3 + static_cast<int>(i)}});
    return r;
  };
  std::vector<json> alone;
  {
    TestServer s;
    for (size_t i = 0; i < kN; ++i) alone.push_back(message_of(s.post("/v1/chat/completions", request(i))));
  }
  server::ServerOptions o;
  o.max_batch = 3;
  TestServer s(o);
  std::vector<std::future<httplib::Result>> futs;
  for (size_t i = 0; i < kN; ++i)
    futs.push_back(std::async(std::launch::async, [&, i] { return s.post("/v1/chat/completions", request(i)); }));
  for (size_t i = 0; i < kN; ++i) {
    const json c = message_of(futs[i].get());
    EXPECT_EQ(c["message"]["content"], alone[i]["message"]["content"]) << "request " << i;
    EXPECT_EQ(c["finish_reason"], alone[i]["finish_reason"]) << "request " << i;
    const std::string content = c["message"]["content"];
    JsonGrammar g;
    EXPECT_TRUE(g.feed(content)) << "not a JSON prefix: " << content;
    EXPECT_EQ(g.complete(), c["finish_reason"] == "stop") << content;
    if (g.complete()) {
      EXPECT_TRUE(json::parse(content).is_object());
    }
  }
}

// The op-log records JSON mode and replay applies it: the log replays identically, and the same log with JSON mode
// taken out of its sampler record diverges (the constraint changed what the model wrote).
TEST(ServerJson, JsonModeOpLogsReplayIdentically) {
  server::ServerOptions o;
  o.log_dir = scratch_dir("oplog_json");
  std::string path;
  {
    TestServer s(o);
    const json c = message_of(s.post("/v1/chat/completions",
                                     chat_request("Reply in JSON: the capital of France?",
                                                  {{"response_format", {{"type", "json_object"}}},
                                                   {"max_tokens", 40}, {"steps", 4}, {"seed", 5}})));
    EXPECT_EQ(c["message"]["content"].get<std::string>().rfind("{", 0), 0u) << c;
    path = s.srv->oplog_path();
  }
  const ReplayReport r = replay_oplog(tiny_server_engine(), path);
  EXPECT_FALSE(r.diverged) << r.divergence;
  EXPECT_EQ(r.jobs, 1);

  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  std::string log = text.str();
  const std::string mark = ",\"json_object\":true";
  const size_t at = log.find(mark);
  ASSERT_NE(at, std::string::npos) << "the sampler record names JSON mode";
  log.erase(at, mark.size());
  const std::string plain = path + ".plain.jsonl";
  std::ofstream(plain) << log;
  const ReplayReport p = replay_oplog(tiny_server_engine(), plain);
  EXPECT_TRUE(p.diverged) << "replayed without JSON mode, the answer must change";
  std::filesystem::remove(plain);
}

}  // namespace server_json_test
}  // namespace dg::test
