// The JSON Schema subset (diffusion/json_schema.h) and the tool-call check built on it (engine/tool_check.h): what
// compiles, what is refused by name, what validates, and the problems a reply's calls get.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "engine/tool_check.h"
#include "chat_test_util.h"
#include "core/error.h"
#include "support/expect_error.h"

namespace dg::test {
namespace json_schema_test {

const Json kWeather = Json::parse(R"({
  "type": "object",
  "properties": {
    "city": {"type": "string", "description": "A city"},
    "days": {"type": "integer"},
    "unit": {"type": "string", "enum": ["C", "F"]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    "where": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"],
              "additionalProperties": false}
  },
  "required": ["city"],
  "additionalProperties": false
})");

TEST(JsonSchema, ValidatesTypesRequiredEnumsArraysAndNestedObjects) {
  const auto s = JsonSchema::compile(kWeather);
  EXPECT_TRUE(s->validate(Json::parse(R"({"city":"Oslo"})")).empty());
  EXPECT_TRUE(s->validate(Json::parse(R"({"city":"Oslo","days":3,"unit":"F","tags":["a"],"where":{"lat":1.5}})"))
                  .empty());
  EXPECT_TRUE(s->validate(Json::parse(R"({"city":"Oslo","days":3.0})")).empty()) << "3.0 is an integer";
  auto one = [&](const char* text) {
    const auto errs = s->validate(Json::parse(text));
    return errs.size() == 1 ? errs[0] : fmt::format("{} errors", errs.size());
  };
  EXPECT_EQ(one(R"({})"), "$: the required property 'city' is missing");
  EXPECT_EQ(one(R"({"city":3})"), "$.city: expected a string, got an integer");
  EXPECT_EQ(one(R"({"city":"x","days":2.5})"), "$.days: expected an integer, got a number");
  EXPECT_EQ(one(R"({"city":"x","unit":"K"})"), R"($.unit: "K" is not one of "C", "F")");
  EXPECT_EQ(one(R"({"city":"x","extra":1})"), "$: unexpected property 'extra'");
  EXPECT_EQ(one(R"({"city":"x","tags":["a","b","c"]})"), "$.tags: 3 items, at most 2 allowed");
  EXPECT_EQ(one(R"({"city":"x","tags":["a",1]})"), "$.tags[1]: expected a string, got an integer");
  EXPECT_EQ(one(R"({"city":"x","where":{}})"), "$.where: the required property 'lat' is missing");
  EXPECT_EQ(one(R"([1])"), "$: expected an object, got an array");
}

TEST(JsonSchema, RefusesUnsupportedKeywordsByName) {
  DG_EXPECT_ERROR(JsonSchema::compile(Json::parse(R"({"type":"object","properties":{"a":{"type":"string",
      "pattern":"^x"}}})")), "schema.properties.a.pattern: unsupported JSON Schema keyword 'pattern'");
  DG_EXPECT_ERROR(JsonSchema::compile(Json::parse(R"({"type":"object","anyOf":[]})")), "'anyOf'");
  DG_EXPECT_ERROR(JsonSchema::compile(Json::parse(R"({"type":"object","additionalProperties":{}})")),
                        "only true or false");
  DG_EXPECT_ERROR(JsonSchema::compile(Json::parse(R"({"type":"string"})")), "the root must be");
  DG_EXPECT_ERROR(JsonSchema::compile(Json::parse(R"({"type":"object","required":["x"]})")),
                        "'x' is not among the properties");
  DG_EXPECT_ERROR(JsonSchema::compile(Json::parse(R"({"type":"blob"})"), "schema", false), "unknown type 'blob'");
  EXPECT_NO_THROW(JsonSchema::compile(Json::parse(R"({"type":"object","title":"t","$schema":"x","description":"d"})")));
}

TEST(JsonSchema, ShortestValues) {
  const auto s = JsonSchema::compile(kWeather);
  EXPECT_EQ(s->node(0).min_bytes, static_cast<int>(std::string(R"({"city":""})").size()));
  const auto e = JsonSchema::compile(Json::parse(R"({"type":"object","properties":{"u":{"enum":["long","no"]},
      "n":{"type":["null","boolean"]},"a":{"type":"array","minItems":2,"items":{"type":"integer"}}},
      "required":["u","n","a"]})"));
  EXPECT_EQ(e->node(0).min_bytes, static_cast<int>(std::string(R"({"u":"no","n":null,"a":[0,0]})").size()));
}

Json tools() {
  return Json::array({{{"type", "function"},
                       {"function", {{"name", "get_weather"}, {"description", "Weather"}, {"parameters", kWeather}}}},
                      {{"type", "function"},
                       {"function", {{"name", "odd"}, {"parameters", {{"type", "object"}, {"anyOf", Json::array()}}}}}}});
}

TEST(ToolSet, ChecksEveryCallOfAReply) {
  const ToolSet set = ToolSet::from(tools());
  EXPECT_NE(set.schema("get_weather"), nullptr);
  EXPECT_EQ(set.schema("odd"), nullptr) << "an unsupported schema is checked by name only";
  DG_EXPECT_ERROR(ToolSet::from(tools(), true), "'anyOf'");
  Reply r;
  r.tool_calls.push_back({"call_0", "get_weather", Json{{"city", "Oslo"}}});
  r.tool_calls.push_back({"call_1", "odd", Json{{"anything", 1}}});
  EXPECT_TRUE(set.check(r, tiny_tokenizer(), tiny_chat_tokens()).empty());
  r.tool_calls.push_back({"call_2", "get_wether", Json{{"city", "Oslo"}}});
  r.tool_calls.push_back({"call_3", "get_weather", Json{{"city", 7}, {"mood", "x"}}});
  r.errors.push_back({"<|tool_call>call:get_weather{city:", "truncated"});
  const std::vector<ToolProblem> ps = set.check(r, tiny_tokenizer(), tiny_chat_tokens());
  ASSERT_EQ(ps.size(), 3u);
  EXPECT_EQ(ps[0].name, "get_weather");
  EXPECT_NE(ps[0].message.find("could not be parsed (truncated)"), std::string::npos) << ps[0].message;
  EXPECT_EQ(ps[1].message, "unknown tool 'get_wether' (declared: get_weather, odd)");
  EXPECT_EQ(ps[1].raw, "<|tool_call>call:get_wether{city:<|\"|>Oslo<|\"|>}<tool_call|>");
  EXPECT_EQ(ps[2].message, "invalid arguments for 'get_weather': $.city: expected a string, got an integer; $: "
                           "unexpected property 'mood'");
}

}  // namespace json_schema_test
}  // namespace dg::test
