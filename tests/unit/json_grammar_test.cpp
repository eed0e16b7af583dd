// JsonGrammar (src/diffusion/json_grammar.h): byte prefixes of one JSON object, checked against nlohmann::json's
// parser where a text is complete.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "diffusion/json_grammar.h"

namespace dg {
namespace json_grammar_test {

// Feeds `text` in pieces of `piece` bytes (split anywhere, UTF-8 characters included); false at the first refusal.
bool feeds(const std::string& text, size_t piece = 1, JsonGrammar* out = nullptr) {
  JsonGrammar g;
  for (size_t at = 0; at < text.size(); at += piece)
    if (!g.feed(std::string_view(text).substr(at, piece))) return false;
  if (out != nullptr) *out = g;
  return true;
}

bool completes(const std::string& text) {
  JsonGrammar g;
  return feeds(text, 1, &g) && g.complete();
}

TEST(JsonGrammar, CompleteObjectsAgreeWithNlohmann) {
  const std::vector<std::string> good = {
      "{}", R"({"a":1})", R"({ "a" : [1, -2.5e+3, 0, 0.0, 1E9, true, false, null], "b": {"c": {}} })",
      R"({"s":"tab\t quote\" slash\/ back\\ \u00e9 \uD83D\uDE00"})", "{\"k\":\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"}",
      "{\n  \"x\": [\n    []\n  ]\n}", R"({"":""})", R"({"n":-0.5e-7})", "{} \n"};
  for (const std::string& t : good) {
    SCOPED_TRACE(t);
    EXPECT_TRUE(completes(t));
    EXPECT_TRUE(completes(t) == nlohmann::json::accept(t));
    for (size_t piece : {2, 3, 5}) EXPECT_TRUE(feeds(t, piece));
  }
}

TEST(JsonGrammar, PrefixesAreOpenUntilTheObjectCloses) {
  const std::string t = R"({"a": [1, {"b": "c"}], "d": 2})";
  for (size_t n = 0; n < t.size(); ++n) {
    JsonGrammar g;
    ASSERT_TRUE(feeds(t.substr(0, n), 1, &g)) << n;
    EXPECT_FALSE(g.complete()) << n;
  }
  JsonGrammar g;
  ASSERT_TRUE(feeds(t, 1, &g));
  EXPECT_TRUE(g.complete());
  EXPECT_EQ(g.bytes(), static_cast<int64_t>(t.size()));
  EXPECT_FALSE(g.feed(std::string_view(",")));  // nothing but whitespace after the object
  EXPECT_FALSE(g.feed(std::string_view("{}")));
  EXPECT_TRUE(g.feed(std::string_view(" \n")));
}

TEST(JsonGrammar, RefusesWhatCannotBecomeOneObject) {
  const std::vector<std::string> bad = {
      "[1]", "\"s\"", "1", "{a:1}", "{'a':1}", R"({"a" 1})", R"({"a":01})", R"({"a":1.})", R"({"a":.5})",
      R"({"a":-})", R"({"a":1e})", R"({"a":+1})", R"({"a":tru })", R"({"a":True})", R"({"a":1,})", R"({"a":[1,]})",
      R"({"a":[1}})", R"({"a":1]})", R"({"a":"\x"})", R"({"a":"\u12G4"})", "{\"a\":\"line\nbreak\"}",
      R"({"a":"\uDC00"})", R"({"a":"\uD800x"})", R"({"a":"\uD800\u0041"})", "{\"a\":\"\xC3\"}", "{\"a\":\"\xC0\x80\"}",
      "{\"a\":\"\xED\xA0\x80\"}", "{\"a\":\"\xF4\x90\x80\x80\"}", "{\"a\":\"\xFF\"}", R"({"a":1}})", R"({,})", "{}x"};
  for (const std::string& t : bad) {
    SCOPED_TRACE(t);
    EXPECT_FALSE(completes(t));
    EXPECT_FALSE(nlohmann::json::accept(t) && nlohmann::json::parse(t).is_object());
  }
}

TEST(JsonGrammar, TheTextStartsWithTheBrace) {
  EXPECT_FALSE(feeds(" {}"));  // valid JSON, but leading whitespace could run on forever
  EXPECT_FALSE(feeds("\n"));
}

TEST(JsonGrammar, NumbersEndAtTheNextStructuralByte) {
  EXPECT_TRUE(completes(R"({"a":12})"));
  EXPECT_TRUE(completes(R"({"a":[0,1.5e3]})"));
  EXPECT_TRUE(completes("{\"a\":7\n}"));
  JsonGrammar g;
  ASSERT_TRUE(feeds(R"({"a":12)", 1, &g));
  EXPECT_TRUE(g.accepts("3"));
  EXPECT_TRUE(g.accepts("}"));
  EXPECT_FALSE(g.accepts("x"));
  EXPECT_FALSE(g.accepts("\"b\""));
}

TEST(JsonGrammar, AMultiByteCharacterSplitAcrossTokens) {
  JsonGrammar g;
  ASSERT_TRUE(feeds(R"({"k":"a)", 1, &g));
  const std::string euro = "\xE2\x82\xAC";
  EXPECT_TRUE(g.feed(euro.substr(0, 1)));
  EXPECT_FALSE(g.accepts("\""));  // the character is unfinished
  EXPECT_FALSE(g.accepts("x"));
  EXPECT_FALSE(g.accepts("\xE2"));
  EXPECT_TRUE(g.feed(euro.substr(1, 1)));
  EXPECT_TRUE(g.feed(euro.substr(2, 1) + "\"}"));
  EXPECT_TRUE(g.complete());
}

TEST(JsonGrammar, ARefusedTokenLeavesTheStateUnchanged) {
  JsonGrammar g;
  ASSERT_TRUE(feeds(R"({"a":[1)", 1, &g));
  const int64_t before = g.bytes();
  EXPECT_FALSE(g.feed(std::string_view(", 2}")));  // the ',' and ' 2' fit, the '}' does not
  EXPECT_EQ(g.bytes(), before);
  EXPECT_TRUE(g.feed(std::string_view(", 2]}")));
  EXPECT_TRUE(g.complete());
}

// closing_bytes is the length of the shortest completion. By induction on it: from every open state some byte
// lowers it by exactly 1 and no byte lowers it by more (and it is 0 exactly when complete).
void expect_exact_closing(const JsonGrammar& g, const std::string& where) {
  const int d = g.closing_bytes();
  ASSERT_EQ(d == 0, g.complete()) << where;
  if (g.complete()) return;
  int lowest = 1 << 20;
  for (int c = 0; c < 256; ++c) {
    JsonGrammar next = g;
    if (next.feed(static_cast<uint8_t>(c))) lowest = std::min(lowest, next.closing_bytes());
  }
  EXPECT_EQ(lowest, d - 1) << where;
}

TEST(JsonGrammar, ClosingBytesIsTheShortestCompletion) {
  const std::vector<std::string> texts = {
      R"({"k": [1, -2.5e+3, {"x": null}], "s": "a\n\u00e9\uD83D\uDE00", "t": true, "f": false})",
      "{\"k\":\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"}", R"({"a":{"b":[{},[]]},"c":0.5E-2})"};
  for (const std::string& t : texts) {
    JsonGrammar g;
    for (size_t n = 0; n <= t.size(); ++n) {
      expect_exact_closing(g, t.substr(0, n));
      if (n < t.size()) {
        ASSERT_TRUE(g.feed(static_cast<uint8_t>(t[n]))) << t.substr(0, n + 1);
      }
    }
    EXPECT_TRUE(g.complete());
  }
  JsonGrammar g;
  ASSERT_TRUE(g.feed(std::string_view(R"({"k":"\uD8)")));
  EXPECT_EQ(g.closing_bytes(), 2 + 6 + 2) << "the rest of the escape, its pair, the quote and the brace";
}

TEST(JsonGrammar, BoundsDepthAndWhitespaceRuns) {
  std::string deep = "{\"a\":";
  for (int i = 1; i < JsonGrammar::kMaxDepth; ++i) deep += "[";
  EXPECT_TRUE(feeds(deep));
  EXPECT_FALSE(feeds(deep + "["));
  EXPECT_TRUE(feeds("{" + std::string(JsonGrammar::kMaxWhitespace, ' ')));
  EXPECT_FALSE(feeds("{" + std::string(JsonGrammar::kMaxWhitespace + 1, ' ')));
  EXPECT_TRUE(feeds("{" + std::string(JsonGrammar::kMaxWhitespace, ' ') + "\"" + std::string(200, ' ')));  // in a string
}

}  // namespace json_grammar_test
}  // namespace dg
