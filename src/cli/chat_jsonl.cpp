// `diffgemma chat --jsonl`: one JSON command per line on stdin, one JSON event per line on stdout (README, "chat").
// Every command answers with at least one event; a bad line answers {"event":"error"} and the session goes on.
#include <istream>
#include <ostream>

#include <fmt/format.h>

#include "chat/json_depth.h"
#include "cli/chat_cli.h"
#include "core/error.h"

namespace dg::cli {
namespace {

class JsonlChat {
 public:
  JsonlChat(ChatSession& chat, const ChatCliOptions& o, std::ostream& out) : chat_(chat), o_(o), out_(out) {}

  void emit(const Json& j) {
    out_ << j.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
    out_.flush();
  }
  void error(const std::string& msg) { emit({{"event", "error"}, {"message", msg}}); }
  void ok(const std::string& op) {
    emit({{"event", "ok"}, {"op", op}, {"messages", chat_.conversation().messages.size()},
          {"kv_tokens", chat_.kv_tokens()}, {"kv_fingerprint", fmt::format("{:016x}", chat_.fingerprint())}});
  }

  void ready() {
    Json names = Json::array();
    for (const Json& t : chat_.conversation().tools) names.push_back(t["function"]["name"]);
    emit({{"event", "ready"}, {"thinking", chat_.options().thinking}, {"tools", names},
          {"kv_tokens", chat_.kv_tokens()}, {"kv_fingerprint", fmt::format("{:016x}", chat_.fingerprint())}});
  }

  // Generates, reports, and runs approved tool rounds (--yes) until the model stops calling tools.
  void turn(bool user, const std::string& text) {
    ChatEvents ev;
    ev.on_reply = [&](const ReplyEvent& e) {
      switch (e.kind) {
        case ReplyEvent::Kind::kContent: emit({{"event", "delta"}, {"content", e.text}}); break;
        case ReplyEvent::Kind::kReasoning: emit({{"event", "reasoning"}, {"content", e.text}}); break;
        case ReplyEvent::Kind::kToolCall:
          emit({{"event", "tool_call"}, {"id", e.call.id}, {"name", e.call.name}, {"arguments", e.call.arguments}});
          break;
        case ReplyEvent::Kind::kToolError:
          emit({{"event", "tool_error"}, {"message", e.error.message}, {"raw", e.error.raw}});
          break;
      }
    };
    TurnResult r = user ? chat_.user(text, &ev) : chat_.generate(&ev);
    for (int round = 0;; ++round) {
      emit({{"event", "turn_end"}, {"finish", r.finish}, {"tokens", r.tokens}, {"forwards", r.forwards},
            {"content", r.reply.content}, {"reasoning", r.reply.reasoning},
            {"prompt", {{"reused", r.prompt.reused}, {"encoded", r.prompt.encoded}, {"rewound", r.prompt.rewound},
                        {"reprefilled", r.prompt.reprefilled}}},
            {"kv_tokens", r.kv_tokens}, {"kv_fingerprint", fmt::format("{:016x}", r.kv_fingerprint)}});
      if (r.reply.tool_calls.empty() || !o_.yes || round + 1 >= o_.max_tool_rounds) return;
      for (const ToolCall& c : r.reply.tool_calls) run_tool(c);
      if (!chat_.pending_calls().empty()) return;  // a call for a tool we do not have: the client answers it
      r = chat_.generate(&ev);
    }
  }

  // Runs the declared command for a pending call (if we have it) and records its result.
  bool run_tool(const ToolCall& c) {
    const ShellTool* t = find_tool(o_.tools, c.name);
    if (t == nullptr) return false;
    const std::string result = run_shell_tool(*t, c);
    chat_.add_tool_result(c.id, result);
    emit({{"event", "tool_result"}, {"id", c.id}, {"name", c.name}, {"content", result}});
    return true;
  }

  void continue_if_answered() {
    if (chat_.pending_calls().empty()) turn(false, "");
  }

  static std::string str(const Json& j, const char* key) {
    DG_CHECK(j.contains(key) && j[key].is_string(), "\"{}\" must be a string", key);
    return j[key].get<std::string>();
  }

  // Returns false on "exit".
  bool command(const Json& j) {
    DG_CHECK(j.is_object() && j.contains("op") && j["op"].is_string(),
             "each line must be a JSON object with an \"op\" (user, generate, tool_result, approve, message, "
             "rewind, clear, save, load, think, system, tools, state, exit)");
    const std::string op = j["op"];
    if (op == "user") {
      turn(true, str(j, "text"));
    } else if (op == "generate") {
      turn(false, "");
    } else if (op == "tool_result") {
      DG_CHECK(j.contains("content"), "tool_result needs \"content\"");
      chat_.add_tool_result(str(j, "id"), j["content"]);
      continue_if_answered();
    } else if (op == "approve") {
      const std::string id = str(j, "id");
      bool done = false;
      for (const ToolCall& c : chat_.pending_calls())
        if (c.id == id) {
          DG_CHECK(run_tool(c), "no --tool named '{}' to run for call '{}'", c.name, id);
          done = true;
        }
      DG_CHECK(done, "no tool call '{}' is waiting for a result", id);
      continue_if_answered();
    } else if (op == "message") {
      DG_CHECK(j.contains("message"), "message needs \"message\" (an OpenAI chat message)");
      chat_.add_message(message_from_json(j["message"], "message"));
      chat_.settle();
      ok(op);
    } else if (op == "rewind") {
      DG_CHECK(chat_.rewind(), "nothing to rewind: the conversation has no user turn");
      ok(op);
    } else if (op == "clear") {
      chat_.clear();
      ok(op);
    } else if (op == "save") {
      chat_.save(str(j, "path"));
      ok(op);
    } else if (op == "load") {
      chat_.load(str(j, "path"));
      ok(op);
    } else if (op == "think") {
      DG_CHECK(j.contains("on") && j["on"].is_boolean(), "think needs \"on\": true or false");
      chat_.set_thinking(j["on"].get<bool>());
      chat_.settle();
      ok(op);
    } else if (op == "system") {
      chat_.set_system(str(j, "text"));
      chat_.settle();
      ok(op);
    } else if (op == "tools") {
      DG_CHECK(j.contains("tools"), "tools needs \"tools\" (an OpenAI tools array)");
      chat_.set_tools(j["tools"]);
      chat_.settle();
      ok(op);
    } else if (op == "state") {
      Json pending = Json::array();
      for (const ToolCall& c : chat_.pending_calls()) pending.push_back({{"id", c.id}, {"name", c.name}});
      Json messages = Json::array();
      for (const Message& m : chat_.conversation().messages) messages.push_back(message_to_json(m));
      emit({{"event", "state"}, {"messages", messages}, {"pending", pending}, {"thinking", chat_.options().thinking},
            {"kv_tokens", chat_.kv_tokens()}, {"kv_fingerprint", fmt::format("{:016x}", chat_.fingerprint())}});
    } else if (op == "exit") {
      return false;
    } else {
      fail("unknown op '{}'", op);
    }
    return true;
  }

 private:
  ChatSession& chat_;
  const ChatCliOptions& o_;
  std::ostream& out_;
};

}  // namespace

int run_chat_jsonl(ChatSession& chat, const ChatCliOptions& o, std::istream& in, std::ostream& out) {
  JsonlChat j(chat, o, out);
  j.ready();
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (json_depth(line) > kMaxJsonDepth) {
      j.error(fmt::format("the line nests arrays and objects deeper than {} levels", kMaxJsonDepth));
      continue;
    }
    const Json cmd = Json::parse(line, nullptr, false);
    if (cmd.is_discarded()) {
      j.error(fmt::format("not a JSON line: {}", line.substr(0, 200)));
      continue;
    }
    try {
      if (!j.command(cmd)) break;
    } catch (const Error& e) {
      j.error(e.what());
    } catch (const nlohmann::json::exception& e) {
      j.error(fmt::format("bad JSON value: {}", e.what()));
    }
  }
  return 0;
}

}  // namespace dg::cli
