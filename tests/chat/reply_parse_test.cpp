// Parsing model output: the thought-channel split, stop handling, tool calls with nested values, malformed and
// truncated calls reported with their text, and render -> parse round trips of the tool grammar.
#include <gtest/gtest.h>

#include "chat/id_writer.h"
#include "chat/stream.h"
#include "chat/tools_parse.h"
#include "chat/tools_render.h"
#include "chat_test_util.h"

namespace dg::test {
namespace reply_parse_test {

const std::vector<int32_t> kStops = {1, 106, 50};

// Builds model output: text pieces encoded as plain text, markers by id.
struct Out {
  std::vector<int32_t> ids;
  Out& t(const std::string& s) {
    for (int32_t id : plain(s)) ids.push_back(id);
    return *this;
  }
  Out& m(int32_t id) {
    ids.push_back(id);
    return *this;
  }
};

Reply parse(const std::vector<int32_t>& ids, bool in_thought = false) {
  return parse_reply(ids, tiny_tokenizer(), tiny_chat_tokens(), kStops, in_thought);
}

std::vector<int32_t> rendered_call(const ToolCall& c) {
  IdWriter w(tiny_tokenizer(), tiny_chat_tokens());
  render_call(w, c);
  return w.take();
}

TEST(ReplyParse, ContentStopsAtTheFirstStopToken) {
  const Reply r = parse(Out().t("  Paris is the capital.  ").m(106).t("junk after").ids);
  EXPECT_EQ(r.content, "Paris is the capital.");
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.stop_token, 106);
  EXPECT_TRUE(r.tool_calls.empty());
}

TEST(ReplyParse, OpenThoughtSplitsAtTheChannelClose) {
  const Reply r = parse(Out().t("First, recall facts.\n").m(101).t("Paris.").m(106).ids, true);
  EXPECT_EQ(r.reasoning, "First, recall facts.");
  EXPECT_EQ(r.content, "Paris.");
}

TEST(ReplyParse, ModelOpenedThoughtDropsTheLabel) {
  const Reply r = parse(Out().m(100).t("thought\nLet me think").m(101).t("Answer").m(1).ids);
  EXPECT_EQ(r.reasoning, "Let me think");
  EXPECT_EQ(r.content, "Answer");
  EXPECT_EQ(r.stop_token, 1);
  // An empty thought channel leaves no reasoning.
  const Reply e = parse(Out().m(100).t("thought\n").m(101).t("Hi").ids);
  EXPECT_EQ(e.reasoning, "");
  EXPECT_EQ(e.content, "Hi");
}

TEST(ReplyParse, OrphanMarkersAndALeadingModelTurnAreAbsorbed) {
  const Reply r = parse(Out().m(105).t("model\nHello").m(101).m(98).t(" world").ids);
  EXPECT_EQ(r.content, "Hello world");
  EXPECT_EQ(r.stop_token, -1);
  const Reply s = parse(Out().t("one").m(105).t("user\nnext turn").ids);  // a later <|turn> ends the reply
  EXPECT_EQ(s.content, "one");
  EXPECT_EQ(s.stop_token, 105);
}

TEST(ReplyParse, ToolCallsWithNestedValues) {
  Out o;
  o.t("Checking.").m(48).t("call:search{filters:{tags:[").m(52).t("a").m(52).t(",").m(52).t("b, c").m(52);
  o.t("],since:None},limit:2.5,page:-7,exact:true,q:").m(52).t("kv {cache}: \"x\"").m(52).t("}").m(49);
  o.m(48).t("call:now{}").m(49).m(50);
  const Reply r = parse(o.ids);
  ASSERT_EQ(r.tool_calls.size(), 2u) << (r.errors.empty() ? "" : r.errors[0].message);
  EXPECT_EQ(r.content, "Checking.");
  EXPECT_EQ(r.stop_token, 50);
  const ToolCall& c = r.tool_calls[0];
  EXPECT_EQ(c.name, "search");
  EXPECT_EQ(c.arguments["filters"]["tags"], Json::array({"a", "b, c"}));
  EXPECT_TRUE(c.arguments["filters"]["since"].is_null());
  EXPECT_DOUBLE_EQ(c.arguments["limit"].get<double>(), 2.5);
  EXPECT_EQ(c.arguments["page"].get<int64_t>(), -7);
  EXPECT_EQ(c.arguments["exact"], true);
  EXPECT_EQ(c.arguments["q"], "kv {cache}: \"x\"");
  EXPECT_EQ(r.tool_calls[1].name, "now");
  EXPECT_TRUE(r.tool_calls[1].arguments.empty());
}

TEST(ReplyParse, MalformedCallsAreReportedWithTheirText) {
  struct Case {
    Out out;
    std::string needle;
  };
  std::vector<Case> cases;
  cases.push_back({Out().m(48).t("call:f{a:").m(52).t("unterminated").m(49), "unterminated string"});
  cases.push_back({Out().m(48).t("call:f{a:bare word}").m(49), "unquoted value 'bare word'"});
  cases.push_back({Out().m(48).t("call:f{a}").m(49), "expected ':' after key 'a'"});
  cases.push_back({Out().m(48).t("invoke:f{}").m(49), "expected 'call:'"});
  cases.push_back({Out().m(48).t("call:{}").m(49), "expected a tool name"});
  cases.push_back({Out().m(48).t("call:f{a:[1,2}").m(49), "expected ',' or ']'"});
  cases.push_back({Out().m(48).t("call:f{a:1} trailing").m(49), "unexpected text after the arguments"});
  cases.push_back({Out().m(48).t("call:f{a:1e999}").m(49), "unquoted value '1e999'"});
  cases.push_back({Out().m(48).t("call:f{a:").m(52).t("x"), "truncated: the output ended"});
  cases.push_back({Out().m(48).t("call:f{a:1").m(106), "truncated: the reply stopped"});
  cases.push_back({Out().m(48).t("call:f{a:1").m(100).t("thought"), "'<|channel>' inside the tool call"});
  cases.push_back({Out().m(48).t("call:f{").m(48).t("call:g{}").m(49), "a new tool call started"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.needle);
    const Reply r = parse(c.out.ids);
    ASSERT_FALSE(r.errors.empty());
    EXPECT_NE(r.errors[0].message.find(c.needle), std::string::npos) << r.errors[0].message;
    EXPECT_EQ(r.errors[0].raw.rfind("<|tool_call>call", 0) == 0 || r.errors[0].raw.rfind("<|tool_call>invoke", 0) == 0,
              true)
        << r.errors[0].raw;
  }
  // The text of a truncated call is kept, markers included.
  const Reply r = parse(Out().t("ok ").m(48).t("call:f{a:").m(52).t("x y").ids);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].raw, "<|tool_call>call:f{a:<|\"|>x y");
  EXPECT_EQ(r.content, "ok");
}

TEST(ReplyParse, DeepNestingIsRefusedNotOverflowed) {
  Out o;
  o.m(48).t("call:f{a:");
  for (int i = 0; i < 10000; ++i) o.t("[");
  o.m(49);
  const Reply r = parse(o.ids);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].message.find("nested deeper"), std::string::npos) << r.errors[0].message;
}

TEST(ToolGrammar, RenderThenParseRoundTrips) {
  const std::vector<Json> args = {
      Json::object(),
      Json::parse(R"({"city":"Paris"})"),
      Json::parse(R"({"n":42,"x":-0.125,"big":1e+300,"tiny":1e-05,"t":true,"f":false,"z":null})"),
      Json::parse(R"({"nested":{"list":[1,"two",{"three":[3.5,null]}],"empty":[],"obj":{}},"Upper":"A","lower":"b"})"),
      Json::parse(R"({"text":"line1\nline2 <|turn> {braces}, [brackets], key:value \"quotes\" é 🚀"})"),
  };
  for (const Json& a : args) {
    SCOPED_TRACE(a.dump());
    ToolCall c;
    c.name = "tool.name-1";
    c.arguments = a;
    std::vector<int32_t> ids = rendered_call(c);
    ids.push_back(50);
    const Reply r = parse(ids);
    ASSERT_EQ(r.tool_calls.size(), 1u) << (r.errors.empty() ? "" : r.errors[0].message);
    EXPECT_EQ(r.tool_calls[0].name, c.name);
    EXPECT_EQ(nlohmann::json::parse(r.tool_calls[0].arguments.dump()), nlohmann::json::parse(a.dump()));
    // Rendering the parsed call again gives the same ids (the canonical form is a fixed point).
    ToolCall again = r.tool_calls[0];
    std::vector<int32_t> ids2 = rendered_call(again);
    ids2.push_back(50);
    EXPECT_TRUE(same_ids(ids2, ids));
  }
}

TEST(ToolGrammar, ResponsesRenderFieldByFieldOrAsValue) {
  IdWriter w(tiny_tokenizer(), tiny_chat_tokens());
  render_response(w, "lookup", Json::parse(R"({"b":[1,2],"A":"x","n":null})"));
  render_response(w, "lookup", Json("plain text"));
  const std::string text = tiny_tokenizer().decode(w.take());
  EXPECT_EQ(text,
            "<|tool_response>response:lookup{A:<|\"|>x<|\"|>,b:[1,2],n:None}<tool_response|>"
            "<|tool_response>response:lookup{value:<|\"|>plain text<|\"|>}<tool_response|>");
}

TEST(ToolGrammar, ParseCallRejectsMarkersInTheBody) {
  const std::vector<int32_t> body = {105};
  const CallParse p = parse_call(body, tiny_tokenizer(), tiny_chat_tokens());
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.error.find("<|turn>"), std::string::npos);
}

}  // namespace reply_parse_test
}  // namespace dg::test
