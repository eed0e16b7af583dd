// `diffgemma chat` end to end on the embedded model, without a terminal: the JSONL mode (events, KV fingerprints
// across rewind, tool rounds with a declared shell tool, save/load, bad lines answered with errors, determinism),
// and the line REPL reading plain stdin.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/process.h"

namespace dg::test {
namespace chat_cli_test {

using nlohmann::json;

struct ChatRun {
  int code = -1;
  std::string out;
  std::vector<json> events;
};

ChatRun chat(const std::string& args, const std::vector<std::string>& lines, int steps = 4) {
  const std::string dir = scratch_dir("chat_cli");
  {
    std::ofstream in(dir + "/in.jsonl");
    for (const std::string& l : lines) in << l << "\n";
  }
  const std::string cmd = cli_path() + " chat -m " + source_path("models/dg-tiny") + " --steps " +
                          std::to_string(steps) + " --max-new-tokens 32 -q --history '' " + args + " < " + dir +
                          "/in.jsonl";
  ChatRun r;
  const ProcessResult pr = run_command(cmd, true);
  r.code = pr.code;
  r.out = pr.out;
  size_t at = 0;
  while (at < r.out.size()) {
    const size_t nl = r.out.find('\n', at);
    const std::string line = r.out.substr(at, nl - at);
    at = nl == std::string::npos ? r.out.size() : nl + 1;
    if (!line.empty() && line[0] == '{') r.events.push_back(json::parse(line));
  }
  return r;
}

std::vector<json> of(const ChatRun& r, const std::string& kind) {
  std::vector<json> v;
  for (const json& e : r.events)
    if (e["event"] == kind) v.push_back(e);
  return v;
}

TEST(ChatCli, JsonlTurnsStreamDeltasAndRewindRestoresTheFingerprint) {
  const ChatRun r = chat("--jsonl", {R"({"op":"user","text":"Hello there"})", R"({"op":"user","text":"Tell me more"})",
                                 R"({"op":"rewind"})", R"({"op":"state"})"});
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_EQ(r.events.front()["event"], "ready");
  const auto ends = of(r, "turn_end");
  ASSERT_EQ(ends.size(), 2u) << r.out;
  // The deltas of a turn add up to its content.
  std::string streamed;
  for (const json& e : r.events) {
    if (e["event"] == "delta") streamed += e["content"].get<std::string>();
    if (e["event"] == "turn_end") break;
  }
  EXPECT_EQ(streamed, ends[0]["content"].get<std::string>());
  for (const json& e : ends) {
    EXPECT_LE(e["tokens"].get<int>(), 32);
    EXPECT_TRUE(e["finish"] == "stop" || e["finish"] == "length");
    EXPECT_EQ(e["kv_fingerprint"].get<std::string>().size(), 16u);
  }
  EXPECT_EQ(ends[1]["prompt"]["reused"], ends[0]["kv_tokens"]) << "turn 2 extends the cache";
  const auto oks = of(r, "ok");
  ASSERT_EQ(oks.size(), 1u);
  EXPECT_EQ(oks[0]["op"], "rewind");
  EXPECT_EQ(oks[0]["kv_fingerprint"], ends[0]["kv_fingerprint"]) << "rewind restores the KV byte for byte";
  EXPECT_EQ(oks[0]["kv_tokens"], ends[0]["kv_tokens"]);
  const auto state = of(r, "state");
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0]["messages"].size(), 2u);
}

TEST(ChatCli, JsonlIsDeterministicPerSeed) {
  // One step of categorical draws from the seeded canvas: the seed shows in the tokens even when a trained model
  // would converge to the same answer from any canvas.
  const std::vector<std::string> lines = {R"({"op":"user","text":"Same question"})"};
  const std::string args = "--jsonl --sampler reference --seed ";
  const ChatRun a = chat(args + "5", lines, 1), b = chat(args + "5", lines, 1), c = chat(args + "6", lines, 1);
  ASSERT_EQ(a.code, 0);
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
}

TEST(ChatCli, JsonlToolRoundRunsTheDeclaredCommandAndContinues) {
  const std::string call =
      R"({"op":"message","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function",)"
      R"("function":{"name":"shout","arguments":"{\"input\":\"quiet words\"}"}}]}})";
  const ChatRun r = chat("--jsonl --tool 'shout=tr a-z A-Z'",
                     {R"({"op":"message","message":{"role":"user","content":"Shout this"}})", call,
                      R"({"op":"state"})", R"({"op":"approve","id":"call_0"})", R"({"op":"state"})"});
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.events.front()["tools"], json::array({"shout"}));
  const auto states = of(r, "state");
  ASSERT_EQ(states.size(), 2u) << r.out;
  EXPECT_EQ(states[0]["pending"], json::parse(R"([{"id":"call_0","name":"shout"}])"));
  const auto results = of(r, "tool_result");
  ASSERT_EQ(results.size(), 1u) << r.out;
  EXPECT_EQ(results[0]["content"], "QUIET WORDS");
  ASSERT_EQ(of(r, "turn_end").size(), 1u) << "the model goes on once the call has its result";
  const json& msgs = states[1]["messages"];
  ASSERT_EQ(msgs.size(), 4u);
  EXPECT_EQ(msgs[2]["role"], "tool");
  EXPECT_EQ(msgs[2]["content"], "QUIET WORDS");
  EXPECT_EQ(msgs[3]["role"], "assistant");
  EXPECT_TRUE(states[1]["pending"].empty());
}

TEST(ChatCli, JsonlClientAnswersCallsAndSavesAndLoads) {
  const std::string file = scratch_dir("chat_cli_save") + "/conv.json";
  const ChatRun r = chat("--jsonl --think --system 'Be brief.'",
                     {R"({"op":"tools","tools":[{"type":"function","function":{"name":"lookup","parameters":)"
                      R"({"type":"object","properties":{"q":{"type":"string"}}}}}]})",
                      R"({"op":"message","message":{"role":"user","content":"Look it up"}})",
                      R"({"op":"message","message":{"role":"assistant","tool_calls":[{"id":"call_0","function":)"
                      R"({"name":"lookup","arguments":{"q":"x"}}}]}})",
                      R"({"op":"tool_result","id":"call_0","content":{"hits":3}})", R"({"op":"save","path":")" + file +
                          R"("})",
                      R"({"op":"clear"})", R"({"op":"load","path":")" + file + R"("})", R"({"op":"state"})"});
  ASSERT_EQ(r.code, 0) << r.out;
  const auto ends = of(r, "turn_end");
  ASSERT_EQ(ends.size(), 1u) << r.out;
  const auto oks = of(r, "ok");
  ASSERT_GE(oks.size(), 6u);
  const json& saved = oks[oks.size() - 3];
  const json& loaded = oks.back();
  EXPECT_EQ(saved["op"], "save");
  EXPECT_EQ(loaded["op"], "load");
  EXPECT_EQ(loaded["kv_fingerprint"], saved["kv_fingerprint"]);
  EXPECT_EQ(oks[oks.size() - 2]["messages"], 1) << "clear keeps the system prompt";
  const json st = of(r, "state").back();
  EXPECT_EQ(st["thinking"], true);
  EXPECT_EQ(st["messages"][3]["content"], json::parse(R"({"hits":3})"));
}

TEST(ChatCli, JsonlBadLinesAnswerWithErrorsAndTheSessionGoesOn) {
  const ChatRun r = chat("--jsonl", {"not json", R"({"no":"op"})", R"({"op":"fly"})", R"({"op":"user"})",
                                 R"({"op":"rewind"})", R"({"op":"tool_result","id":"call_7","content":"x"})",
                                 R"({"op":"load","path":"/nonexistent/x.json"})",
                                 R"({"op":"message","message":{"role":"wizard"}})", R"({"op":"user","text":"ok"})"});
  ASSERT_EQ(r.code, 0) << r.out;
  const auto errors = of(r, "error");
  ASSERT_EQ(errors.size(), 8u) << r.out;
  for (const char* needle : {"not a JSON line", "\"op\"", "unknown op 'fly'", "\"text\" must be a string",
                             "nothing to rewind", "call_7", "/nonexistent/x.json", "unknown role 'wizard'"}) {
    bool found = false;
    for (const json& e : errors) found = found || e["message"].get<std::string>().find(needle) != std::string::npos;
    EXPECT_TRUE(found) << needle;
  }
  EXPECT_EQ(of(r, "turn_end").size(), 1u);
}

// Lines nested far deeper than any command (a tool schema, a message) are refused before they are walked: the
// declarations' renderer recursed once per level and the process died of a stack overflow.
TEST(ChatCli, JsonlDeeplyNestedLinesAreRefusedAndTheSessionGoesOn) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string saved = scratch_dir("chat_cli_deep") + "/deep.json";
  std::ofstream(saved) << R"({"messages":[{"role":"user","content":"hi","x":)" << deep << "}]}";
  const ChatRun r = chat("--jsonl", {R"({"op":"tools","tools":[{"type":"function","function":{"name":"f",)"
                                     R"("parameters":{"type":"object","properties":{"x":{"enum":[)" + deep + "]}}}}}]}",
                                     R"({"op":"load","path":")" + saved + R"("})", R"({"op":"user","text":"ok"})"});
  ASSERT_EQ(r.code, 0) << r.out.substr(0, 2000);
  const auto errors = of(r, "error");
  ASSERT_EQ(errors.size(), 2u) << r.out.substr(0, 2000);
  for (const json& e : errors) EXPECT_NE(e["message"].get<std::string>().find("deeper than 128 levels"),
                                         std::string::npos) << e;
  EXPECT_EQ(of(r, "turn_end").size(), 1u);
}

TEST(ChatCli, ReplReadsPlainLinesWithoutATerminal) {
  const std::string file = scratch_dir("chat_cli_repl") + "/conv.json";
  const std::string dir = scratch_dir("chat_cli_repl");
  const ChatRun r = chat("", {"Hello", "/rewind", "/rewind", "/think on", "Again", "/save " + file, "/bogus",
                              "/clear everything", "/load " + dir, "/exit", "never read"});
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(last exchange undone; kv 1 tokens)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(nothing to rewind)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(thinking on)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unknown command '/bogus'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/clear takes no argument (it was given 'everything')"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("(conversation cleared)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'" + dir + "' is a directory, not a conversation file"), std::string::npos) << r.out;
  std::ifstream saved(file);
  ASSERT_TRUE(saved.good());
  const json j = json::parse(saved);
  EXPECT_EQ(j["thinking"], true);
  ASSERT_EQ(j["messages"].size(), 2u);
  EXPECT_EQ(j["messages"][0]["content"], "Again");
}

// A bad or repeated --tool is a usage error, before the model loads (a bad one was a runtime error, exit 1; a
// repeated name was declared twice, and the second command could never run); so is a repeated name in a tools op.
TEST(ChatCli, BadToolSpecIsAUsageError) {
  ChatRun r = chat("--tool 'no equals sign'", {});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("expected NAME=COMMAND"), std::string::npos) << r.out;
  r = chat("--tool 'a b=cat'", {});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("the name must be letters"), std::string::npos) << r.out;
  r = chat("--tool 'up=tr a-z A-Z' --tool 'up:shout=cat'", {});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--tool 'up:shout=cat': a tool named 'up' is already declared ('up=tr a-z A-Z')"),
            std::string::npos) << r.out;
  const std::string f = R"({"type":"function","function":{"name":"f"}})";
  r = chat("--jsonl", {R"({"op":"tools","tools":[)" + f + "," + f + "]}", R"({"op":"state"})"});
  ASSERT_EQ(r.code, 0) << r.out;
  const auto errors = of(r, "error");
  ASSERT_EQ(errors.size(), 1u) << r.out;
  EXPECT_NE(errors[0]["message"].get<std::string>().find("tools[1] declares the function 'f' again"),
            std::string::npos) << errors[0];
}

TEST(ChatCli, CtxBoundsTheConversationAndIsChecked) {
  std::string words;
  for (int i = 0; i < 200; ++i) words += " river";  // one token each
  const ChatRun r = chat("--jsonl --ctx 128", {R"({"op":"user","text":")" + words + R"("})", R"({"op":"user","text":"hi"})"});
  ASSERT_EQ(r.code, 0) << r.out;
  const auto errors = of(r, "error");
  ASSERT_EQ(errors.size(), 1u) << r.out;
  const std::string m = errors[0]["message"].get<std::string>();
  EXPECT_NE(m.find("this chat's context (--ctx) holds 128 tokens"), std::string::npos) << m;
  EXPECT_NE(m.find("start the chat with a larger --ctx"), std::string::npos) << m;
  EXPECT_EQ(of(r, "turn_end").size(), 1u);  // the short message still runs
  const ChatRun bad = chat("--ctx 0", {});
  EXPECT_EQ(bad.code, 2) << bad.out;  // a usage error
  EXPECT_NE(bad.out.find("--ctx"), std::string::npos) << bad.out;
}

}  // namespace chat_cli_test
}  // namespace dg::test
