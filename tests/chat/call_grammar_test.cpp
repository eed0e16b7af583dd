// CallGrammar (diffusion/call_grammar.h) and the call syntax of SchemaGrammar: what a tool call's body may be, byte
// by byte, and the property the closing walk rests on: from any accepted prefix some byte lowers closing_bytes() by
// exactly one, and following such bytes ends in a call that chat/tools_parse.h parses, naming a declared tool whose
// arguments validate against its schema. <|"|> stands as kQuoteByte and <tool_call|> as kCloseByte; the texts are
// turned into the embedded tokenizer's ids to be parsed as the reply stream parses them.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "chat/tools_parse.h"
#include "chat_test_util.h"
#include "diffusion/call_grammar.h"
#include "support/expect_error.h"
#include "support/grammar_close.h"

namespace dg::test {
namespace call_grammar_test {

using J = SchemaJson;

const std::string Q(1, static_cast<char>(kQuoteByte));
const std::string E(1, static_cast<char>(kCloseByte));

// A strict tool with an enum, a nested object, an array with bounds and required fields; a strict one whose names
// must be quoted or may be additional; a tool without a schema (not strict: any object).
std::vector<CallTool> tools() {
  return {
      {"get_weather", JsonSchema::compile(J::parse(R"({"type":"object","properties":{
          "city":{"type":"string"},"unit":{"enum":["C","F"]},"days":{"type":"integer"},
          "where":{"type":"object","properties":{"lat":{"type":"number"},"ok":{"type":"boolean"}},
                   "required":["lat"],"additionalProperties":false},
          "hours":{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3},
          "note":{"type":["string","null"]}},
          "required":["city","unit","where"],"additionalProperties":false})"), "get_weather", false)},
      {"get", JsonSchema::compile(J::parse(R"({"type":"object","properties":{"a b":{"enum":[1,2.5,"x y",null]},
          "n":{"type":"number"}},"required":["a b"]})"), "get", false)},
      {"note", nullptr},
  };
}

bool accepts(const std::string& text) {
  static const std::vector<CallTool> ts = tools();
  CallGrammar g(&ts);
  return g.feed(text);
}

// The body's ids as the model would write them: text, <|"|> for kQuoteByte, <tool_call|> for kCloseByte.
std::vector<int32_t> body_ids(const std::string& text) {
  std::vector<int32_t> out;
  std::string run;
  auto flush = [&] {
    const std::vector<int32_t> p = plain(run);
    out.insert(out.end(), p.begin(), p.end());
    run.clear();
  };
  for (const char c : text) {
    if (static_cast<uint8_t>(c) == kQuoteByte || static_cast<uint8_t>(c) == kCloseByte) {
      flush();
      out.push_back(static_cast<uint8_t>(c) == kQuoteByte ? tiny_chat_tokens().quote : tiny_chat_tokens().call_close);
    } else {
      run += c;
    }
  }
  flush();
  return out;
}

TEST(CallGrammar, AcceptsOnlyPrefixesOfValidCalls) {
  EXPECT_TRUE(accepts("call:get_weather{city:" + Q + "Oslo" + Q + ",unit:" + Q + "C" + Q + ",where:{lat:59.9}}" + E));
  EXPECT_TRUE(accepts("call:get_weather{ where: {ok:true, lat:-1e3}, unit:" + Q + "F" + Q + ", city:" + Q +
                      "a \"b\" \\ c\n" + Q + ", hours:[1,2], note:None, days:3}" + E));
  EXPECT_TRUE(accepts("call:get{" + Q + "a b" + Q + ":" + Q + "x y" + Q + ",n:1,extra:[{}]}" + E));
  EXPECT_TRUE(accepts("call:get{" + Q + "a b" + Q + ":null}" + E));
  EXPECT_TRUE(accepts("call:note{anything:{deep:[1," + Q + Q + ",None]}," + Q + "quoted key" + Q + ":2}" + E));
  EXPECT_FALSE(accepts("call:get_time")) << "a tool that was not declared";
  EXPECT_FALSE(accepts("call:get_weather(")) << "the arguments are an object";
  EXPECT_FALSE(accepts("call: get_weather")) << "no space after call:";
  EXPECT_FALSE(accepts("call:get_weather{\"city\"")) << "a JSON key";
  EXPECT_FALSE(accepts("call:get_weather{city:\"")) << "a JSON string";
  EXPECT_FALSE(accepts("call:get_weather{town:")) << "a property the schema does not list";
  EXPECT_FALSE(accepts("call:get_weather{cit y")) << "whitespace inside a bare key";
  EXPECT_FALSE(accepts("call:get_weather{unit:" + Q + "K")) << "not in the enum";
  EXPECT_FALSE(accepts("call:get_weather{days:1.5")) << "an integer";
  EXPECT_FALSE(accepts("call:get_weather{where:{ok:true}")) << "a required property missing";
  EXPECT_FALSE(accepts("call:get_weather{hours:[]")) << "minItems";
  EXPECT_FALSE(accepts("call:get_weather{hours:[1,2,3,")) << "maxItems";
  EXPECT_FALSE(accepts("call:get_weather{city:" + Q + "a" + Q + ",city:")) << "a property twice";
  EXPECT_FALSE(accepts("call:get_weather{city:" + Q + "a" + Q + ",unit:" + Q + "C" + Q + ",where:{lat:1}}}"));
  EXPECT_FALSE(accepts("call:get_weather{city:" + Q + "a" + Q + ",unit:" + Q + "C" + Q + ",where:{lat:1}} " + E))
      << "<tool_call|> right after the arguments";
  EXPECT_FALSE(accepts("call:get{" + Q + "m" + Q + ":")) << "a quoted key must be a listed name";
  EXPECT_TRUE(accepts("call:get{m:")) << "a bare one may be any name the schema allows";
  EXPECT_FALSE(accepts("call:get{" + Q + "a b" + Q + ":3")) << "the enum";
  EXPECT_FALSE(accepts("call:get{a b")) << "a name that needs quoting cannot be bare";
  EXPECT_FALSE(accepts("call:note{a:None}" + E + "x")) << "nothing after <tool_call|>";
}

TEST(CallGrammar, RefusesToolsNoCallCanName) {
  const std::vector<CallTool> none = {{"two words", nullptr}};
  DG_EXPECT_ERROR((void)CallGrammar(&none), "no declared tool has a name a tool call can hold");
  const std::vector<CallTool> list = {{"f", JsonSchema::compile(J::parse(R"({"type":"array"})"), "f", false)}};
  DG_EXPECT_ERROR((void)CallGrammar(&list), "tool 'f': its parameters must accept an object");
}

// A shortest completion: printable ASCII, then the marker bytes from kCloseByte up (the other high bytes are not
// the grammar's).
std::string close(const CallGrammar& g) {
  std::vector<uint8_t> bytes = byte_range(0x20, 0x7E);
  for (const uint8_t c : byte_range(kCloseByte, 0xFF)) bytes.push_back(c);
  return close_greedily(g, bytes);
}

TEST(CallGrammar, EveryPrefixClosesInExactlyClosingBytesIntoACallThatParsesAndValidates) {
  const std::vector<CallTool> ts = tools();
  const std::string alphabet = "{}[]:,. -0129eEtrufalsnNo\"\\cgw_ehyixdkpb" + Q + Q + Q + E;
  std::mt19937 rng(11);
  for (int trial = 0; trial < 600; ++trial) {
    CallGrammar g(&ts);
    // Start inside a name now and then, or well into the arguments of one tool.
    const std::string starts[] = {"", "call:", "call:get", "call:get_weather{", "call:get{", "call:note{"};
    std::string text = starts[trial % 6];
    ASSERT_TRUE(g.feed(text));
    const int len = static_cast<int>(rng() % 50);
    for (int k = 0; k < len && !g.complete(); ++k)
      for (int tries = 0; tries < 40; ++tries) {  // a random byte that the grammar accepts
        const char c = alphabet[rng() % alphabet.size()];
        if (g.feed(static_cast<uint8_t>(c))) {
          text += c;
          break;
        }
      }
    const int d = g.closing_bytes();
    const std::string tail = close(g);
    ASSERT_EQ(static_cast<int>(tail.size()), d) << "prefix " << text;
    const std::string call = text + tail;
    ASSERT_EQ(static_cast<uint8_t>(call.back()), kCloseByte) << call;
    const std::vector<int32_t> body = body_ids(call.substr(0, call.size() - 1));
    const CallParse p = parse_call(body, tiny_tokenizer(), tiny_chat_tokens());
    ASSERT_TRUE(p.ok) << call << ": " << p.error;
    const auto tool = std::find_if(ts.begin(), ts.end(), [&](const CallTool& t) { return t.name == p.call.name; });
    ASSERT_NE(tool, ts.end()) << call;
    if (tool->schema == nullptr) {
      EXPECT_TRUE(p.call.arguments.is_object()) << call;
      continue;
    }
    const std::vector<std::string> errs = tool->schema->validate(J::parse(p.call.arguments.dump()));
    EXPECT_TRUE(errs.empty()) << call << ": " << (errs.empty() ? "" : errs[0]);
  }
}

}  // namespace call_grammar_test
}  // namespace dg::test
