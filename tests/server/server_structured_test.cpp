// response_format json_schema on the embedded model: the answer content parses and validates against the schema
// (an enum beside an integer and a string; a nested object with a boolean and an array of enum strings with
// minItems/maxItems; an array of objects of numbers beside a string-or-null), plain and streamed, on the serial and
// the batched worker, and the op-log replays the constraint; on scripted replies, the object the script writes. A keyword the constraint does not support is a 400
// naming it and where it is, as is a budget below the schema's shortest object.
#include <gtest/gtest.h>

#include <future>

#include "diffusion/json_schema.h"
#include "engine/oplog.h"
#include "server_test_util.h"
#include "support/paths.h"

namespace dg::test {
namespace server_structured_test {

const json kEnumSchema = json::parse(R"({"type":"object","properties":{
    "colour":{"enum":["red","green","blue"]},"count":{"type":"integer"},"name":{"type":"string"}},
    "required":["colour","count","name"],"additionalProperties":false})");
const json kNestedSchema = json::parse(R"({"type":"object","properties":{
    "city":{"type":"object","properties":{"name":{"type":"string"},"capital":{"type":"boolean"}},
            "required":["name","capital"]},
    "tags":{"type":"array","items":{"enum":["old","big","cold"]},"minItems":1,"maxItems":3}},
    "required":["city","tags"]})");
const json kArraySchema = json::parse(R"({"type":"object","properties":{
    "points":{"type":"array","items":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},
              "required":["x","y"],"additionalProperties":false},"maxItems":2},
    "note":{"type":["string","null"]}},"required":["points","note"]})");

json schema_request(const std::string& user, const json& schema, int seed) {
  return chat_request(user, {{"response_format", {{"type", "json_schema"},
                                                  {"json_schema", {{"name", "answer"}, {"schema", schema}}}}},
                             {"max_tokens", 64}, {"steps", 4}, {"seed", seed}});
}

// The answer's content, checked: it parses, validates against `schema`, and the answer stopped on its own.
std::string valid_content(const httplib::Result& r, const json& schema) {
  EXPECT_TRUE(r);
  if (!r) return {};
  EXPECT_EQ(r->status, 200) << r->body;
  const json c = json::parse(r->body)["choices"][0];
  const std::string content = c["message"]["content"];
  EXPECT_EQ(c["finish_reason"], "stop") << content;
  EXPECT_TRUE(json::accept(content)) << content;
  if (!json::accept(content)) return content;
  const std::vector<std::string> problems =
      JsonSchema::compile(SchemaJson(schema))->validate(SchemaJson::parse(content));
  EXPECT_TRUE(problems.empty()) << content << ": " << (problems.empty() ? "" : problems[0]);
  return content;
}

TEST(ServerStructured, JsonSchemaAnswersParseAndValidate) {
  TestServer s;
  const std::vector<std::pair<std::string, json>> cases = {
      {"Describe a colour as JSON.", kEnumSchema},
      {"Describe Paris as JSON.", kNestedSchema},
      {"Give two points as JSON.", kArraySchema}};
  for (size_t i = 0; i < cases.size(); ++i)
    valid_content(s.post("/v1/chat/completions", schema_request(cases[i].first, cases[i].second, 11 + int(i))),
                  cases[i].second);

  json streamed = schema_request("Describe Paris as JSON.", kNestedSchema, 7);
  streamed["stream"] = true;
  auto r = s.post("/v1/chat/completions", streamed);
  ASSERT_TRUE(r);
  const SseStream st = parse_sse(r->body);
  ASSERT_TRUE(st.error.empty() && st.done) << r->body;
  std::string content;
  for (const json& ch : st.chunks)
    if (!ch["choices"].empty() && ch["choices"][0]["delta"].contains("content"))
      content += ch["choices"][0]["delta"]["content"].get<std::string>();
  ASSERT_TRUE(json::accept(content)) << content;
  EXPECT_TRUE(JsonSchema::compile(SchemaJson(kNestedSchema))->validate(SchemaJson::parse(content)).empty())
      << content;
}

// The batched worker runs the same constraint (rows from the batched forward) and answers as the serial one; the
// op-log carries the schema and replays identically.
TEST(ServerStructured, BatchedAnswersAsSerialAndTheOpLogReplays) {
  const std::vector<std::pair<std::string, json>> cases = {{"Describe a colour as JSON.", kEnumSchema},
                                                           {"Give two points as JSON.", kArraySchema}};
  std::vector<std::string> alone;
  {
    TestServer s;
    for (size_t i = 0; i < cases.size(); ++i)
      alone.push_back(valid_content(
          s.post("/v1/chat/completions", schema_request(cases[i].first, cases[i].second, 21 + int(i))),
          cases[i].second));
  }
  server::ServerOptions o;
  o.max_batch = 2;
  o.log_dir = scratch_dir("oplog_json_schema");
  std::string log;
  {
    TestServer s(o);
    std::vector<std::future<httplib::Result>> futs;
    for (size_t i = 0; i < cases.size(); ++i)
      futs.push_back(std::async(std::launch::async, [&, i] {
        return s.post("/v1/chat/completions", schema_request(cases[i].first, cases[i].second, 21 + int(i)));
      }));
    for (size_t i = 0; i < cases.size(); ++i)
      EXPECT_EQ(valid_content(futs[i].get(), cases[i].second), alone[i]) << "request " << i;
    log = s.srv->oplog_path();
  }
  const ReplayReport r = replay_oplog(tiny_server_engine(), log);
  EXPECT_FALSE(r.diverged) << r.divergence;
  EXPECT_EQ(r.jobs, 2);
}

// On scripted replies (an object, then prose): the schema keeps the object and ends the answer with it, and a schema
// the reply does not fit (temp a string) has its rows replaced until the object validates.
TEST(ServerStructured, ScriptedAnswersEndWithTheSchemasObject) {
  TestServer s({}, true);
  const json fits = json::parse(R"({"type":"object","properties":{"city":{"enum":["Paris","Oslo"]},
      "temp":{"type":"integer"}},"required":["city","temp"],"additionalProperties":false})");
  EXPECT_EQ(valid_content(s.post("/v1/chat/completions", schema_request("Reply in JSON", fits, 1)), fits),
            R"({"city": "Paris", "temp": 18})");
  json other = fits;
  other["properties"]["temp"] = {{"type", "string"}};
  const std::string content =
      valid_content(s.post("/v1/chat/completions", schema_request("Reply in JSON", other, 1)), other);
  EXPECT_EQ(content.rfind(R"({"city": "Paris", "temp":)", 0), 0u) << json(content).dump();
  EXPECT_TRUE(json::accept(content) && json::parse(content)["temp"].is_string()) << json(content).dump();

  // The Responses API's text.format carries the schema at its top level.
  auto r = s.post("/v1/responses", {{"input", "Reply in JSON"}, {"max_output_tokens", 64}, {"steps", 2},
                                    {"text", {{"format", {{"type", "json_schema"}, {"name", "w"}, {"schema", fits}}}}}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  std::string text;
  const json answer = json::parse(r->body);
  for (const json& o : answer["output"])
    if (o["type"] == "message") text += o["content"][0]["text"].get<std::string>();
  EXPECT_EQ(text, R"({"city": "Paris", "temp": 18})") << r->body;
}

TEST(ServerStructured, UnsupportedSchemasAndShortBudgetsAre400) {
  TestServer s({}, true);
  auto expect_400 = [&](const std::string& path, const json& body, const std::string& param,
                        const std::string& says) {
    auto r = s.post(path, body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    const json e = json::parse(r->body)["error"];
    EXPECT_EQ(e["param"], param) << r->body;
    EXPECT_NE(e["message"].get<std::string>().find(says), std::string::npos) << r->body;
  };
  const json min_length = {{"type", "object"}, {"properties", {{"a", {{"type", "string"}, {"minLength", 2}}}}}};
  expect_400("/v1/chat/completions", schema_request("JSON please", min_length, 1), "response_format",
             "response_format.json_schema.schema.properties.a.minLength: unsupported JSON Schema keyword "
             "'minLength'");
  const json any_of = {{"type", "object"}, {"anyOf", json::array({{{"required", {"a"}}}})}};
  expect_400("/v1/chat/completions", schema_request("JSON please", any_of, 1), "response_format", "'anyOf'");
  json short_budget = schema_request("JSON please", kEnumSchema, 1);
  short_budget["max_tokens"] = 5;
  expect_400("/v1/chat/completions", short_budget, "max_tokens", "shortest");
  json thinking = schema_request("JSON please", kEnumSchema, 1);
  thinking["thinking"] = true;
  expect_400("/v1/chat/completions", thinking, "response_format", "thinking");
  expect_400("/v1/chat/completions",
             chat_request("JSON please", {{"response_format", {{"type", "json_schema"}, {"json_schema", "x"}}}}),
             "response_format", "'json_schema' object");
  // The Responses API's flat text.format, its path named as the client wrote it.
  expect_400("/v1/responses",
             {{"input", "JSON please"},
              {"text", {{"format", {{"type", "json_schema"}, {"name", "a"}, {"schema", min_length}}}}}},
             "text.format", "text.format.schema.properties.a.minLength");
}

}  // namespace server_structured_test
}  // namespace dg::test
