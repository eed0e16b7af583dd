// SchemaGrammar (diffusion/json_schema_grammar.h): what a schema lets through byte by byte, and the property the
// closing walk rests on: from any accepted prefix some byte lowers closing_bytes() by exactly one, and following
// such bytes ends in a complete object that parses and validates. Random prefixes over several schemas.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "diffusion/json_schema_grammar.h"
#include "support/grammar_close.h"

namespace dg {
namespace json_schema_grammar_test {

using J = SchemaJson;

const J kSchema = J::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "age": {"type": "integer"},
    "unit": {"enum": ["C", "F", 10, null]},
    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
    "where": {"type": "object", "properties": {"lat": {"type": "number"}, "ok": {"type": "boolean"}},
              "required": ["lat", "ok"], "additionalProperties": false},
    "note": {"type": ["string", "null"]}
  },
  "required": ["name", "unit", "where"],
  "additionalProperties": false
})");

bool accepts(const J& schema, const std::string& text) {
  const auto s = JsonSchema::compile(schema);
  SchemaGrammar g(s.get());
  return g.feed(text);
}

TEST(SchemaGrammar, AcceptsOnlyPrefixesOfValidObjects) {
  EXPECT_TRUE(accepts(kSchema, R"({"name":"Ann","unit":"C","where":{"lat":1.5,"ok":true}})"));
  EXPECT_TRUE(accepts(kSchema, R"({ "where" : {"ok":false, "lat":-2e3}, "unit":10, "name":"", "tags":["a","b"]})"));
  EXPECT_TRUE(accepts(kSchema, R"({"unit":null,"note":null,"age":-0)"));
  EXPECT_FALSE(accepts(kSchema, R"({"nam":)")) << "a property name the schema does not spell";
  EXPECT_FALSE(accepts(kSchema, R"({"extra")"));
  EXPECT_FALSE(accepts(kSchema, R"({"name":3)")) << "a string expected";
  EXPECT_FALSE(accepts(kSchema, R"({"age":1.)")) << "an integer";
  EXPECT_FALSE(accepts(kSchema, R"({"age":1e)"));
  EXPECT_FALSE(accepts(kSchema, R"({"unit":"K)"));
  EXPECT_FALSE(accepts(kSchema, R"({"unit":1,)")) << "10 is allowed, 1 is not";
  EXPECT_FALSE(accepts(kSchema, R"({"unit":true)"));
  EXPECT_FALSE(accepts(kSchema, R"({"name":"a","name")")) << "a property twice";
  EXPECT_FALSE(accepts(kSchema, R"({"name":"a"})")) << "required properties missing";
  EXPECT_FALSE(accepts(kSchema, R"({"tags":[])")) << "minItems";
  EXPECT_FALSE(accepts(kSchema, R"({"tags":["a","b","c",)")) << "maxItems";
  EXPECT_FALSE(accepts(kSchema, R"({"where":{"lat":1,"ok":true,)")) << "nothing may follow";
  EXPECT_FALSE(accepts(kSchema, R"({"note":[)"));
  EXPECT_TRUE(accepts(J::parse(R"({"type":"object"})"), R"({"any":[1,{"x":null}],"b":"c"})"));
  // Numbers stay within a double's range, so the text parses.
  EXPECT_TRUE(accepts(kSchema, R"({"where":{"lat":-1.5e99)"));
  EXPECT_FALSE(accepts(kSchema, R"({"where":{"lat":-1.5e100)"));
  EXPECT_TRUE(accepts(kSchema, R"({"age":)" + std::string(200, '7')));
  EXPECT_FALSE(accepts(kSchema, R"({"age":)" + std::string(201, '7')));
}

TEST(SchemaGrammar, WithoutASchemaItIsJsonGrammar) {
  SchemaGrammar g;
  JsonGrammar j;
  const std::string text = R"({"a":[1,2,{"b":"\u00e9"}],"c":tr)";
  EXPECT_TRUE(g.feed(text));
  EXPECT_TRUE(j.feed(text));
  EXPECT_EQ(g.closing_bytes(), j.closing_bytes());
}

// A shortest completion in printable ASCII.
std::string close(const SchemaGrammar& g) { return test::close_greedily(g, test::byte_range(0x20, 0x7E)); }

TEST(SchemaGrammar, EveryPrefixClosesInExactlyClosingBytesAndValidates) {
  const J schemas[] = {
      kSchema,
      J::parse(R"({"type":"object","properties":{"a":{"type":"array","minItems":2,"items":{"type":"object",
          "properties":{"k":{"enum":["xy","x"]}},"required":["k"]}}},"required":["a"]})"),
      J::parse(R"({"type":"object"})"),
      J::parse(R"({"type":"object","properties":{"s":{"type":"string"},"n":{"type":"number"}},
          "required":["s","n"],"additionalProperties":true})"),
  };
  const std::string alphabet = "{}[]\":,. -01239eEtrufalsn\\ABCxykuniteamgwhrdopqz";
  std::mt19937 rng(7);
  for (const J& sj : schemas) {
    const auto schema = JsonSchema::compile(sj);
    for (int trial = 0; trial < 300; ++trial) {
      SchemaGrammar g(schema.get());
      std::string text;
      const int len = static_cast<int>(rng() % 60);
      for (int k = 0; k < len && !g.complete(); ++k) {
        for (int tries = 0; tries < 40; ++tries) {  // a random byte that the grammar accepts
          const char c = alphabet[rng() % alphabet.size()];
          if (g.feed(static_cast<uint8_t>(c))) {
            text += c;
            break;
          }
        }
      }
      const int d = g.closing_bytes();
      const std::string tail = close(g);
      ASSERT_EQ(static_cast<int>(tail.size()), d) << "prefix " << text << " of " << sj.dump();
      const J value = J::parse(text + tail, nullptr, false);
      ASSERT_FALSE(value.is_discarded()) << text + tail;
      const std::vector<std::string> errs = schema->validate(value);
      EXPECT_TRUE(errs.empty()) << text + tail << ": " << (errs.empty() ? "" : errs[0]);
    }
  }
}

// A key that spells a name already written can still become another name where additionalProperties allows one:
// one byte more ("ax"), then the quote, ':' and the shortest value.
TEST(SchemaGrammar, AKeySpellingAWrittenNameClosesThroughAnotherName) {
  const auto schema = JsonSchema::compile(J::parse(R"({"type":"object","properties":{"a":{"type":"boolean"}}})"));
  SchemaGrammar g(schema.get());
  ASSERT_TRUE(g.feed(R"({"a":true,"a)"));
  EXPECT_EQ(g.closing_bytes(), 5);
  const std::string tail = close(g);
  EXPECT_EQ(tail.size(), 5u);
  EXPECT_TRUE(J::accept(R"({"a":true,"a)" + tail)) << tail;
}

}  // namespace json_schema_grammar_test
}  // namespace dg
