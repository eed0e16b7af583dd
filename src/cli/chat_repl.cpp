// `diffgemma chat` interactive: a line editor with history (libedit), streamed answers (reasoning dimmed), slash
// commands, and shell tools run after a confirmation. Without a terminal it reads plain lines from stdin.
// Ctrl-C stops the answer in progress (the exchange is dropped and the KV cache returns to its state before it) or
// drops the line being typed; only Ctrl-D (end of input) or /exit ends the session.
#include <unistd.h>

#include <clocale>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <iostream>

#if !defined(DG_NO_LINE_EDITING)
#include <editline/readline.h>
#else
// Builds without libedit (the GPU machine's image): plain line reading, no history.
namespace {
inline int read_history(const char*) { return 0; }
inline int write_history(const char*) { return 0; }
inline void add_history(const char*) {}
inline char* readline(const char* prompt) {
  std::fputs(prompt, stdout);
  std::fflush(stdout);
  std::string line;
  if (!std::getline(std::cin, line)) return nullptr;
  return strdup(line.c_str());
}
}  // namespace
#endif
#include <fmt/format.h>

#include "cli/chat_cli.h"
#include "cli/progress.h"
#include "core/error.h"

namespace dg::cli {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_sigint(int) { g_interrupted = 1; }

// While alive, SIGINT sets g_interrupted instead of ending the process. No SA_RESTART: a blocking read of the line
// editor returns, so a line being typed is dropped.
class SigintCatcher {
 public:
  SigintCatcher() {
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, &old_);
#if !defined(DG_NO_LINE_EDITING)
    rl_catch_signals = 0;  // libedit's own handler would re-send the signal to the whole process group
#endif
  }
  ~SigintCatcher() { ::sigaction(SIGINT, &old_, nullptr); }
  SigintCatcher(const SigintCatcher&) = delete;
  SigintCatcher& operator=(const SigintCatcher&) = delete;

 private:
  struct sigaction old_ {};
};

constexpr const char* kHelp =
    "  /help            this list\n"
    "  /clear           forget the conversation (the system prompt stays)\n"
    "  /rewind          undo the last exchange (the KV cache returns to its state before it)\n"
    "  /save FILE       write the conversation as JSON\n"
    "  /load FILE       read a conversation written by /save\n"
    "  /think on|off    thinking mode\n"
    "  /exit            quit (also Ctrl-D; Ctrl-C stops an answer and drops the exchange)\n";

class Repl {
 public:
  Repl(ChatSession& chat, const ChatCliOptions& o)
      : chat_(chat), o_(o), tty_in_(::isatty(STDIN_FILENO) != 0), color_out_(color_terminal(STDOUT_FILENO)) {}

  int run() {
    if (tty_in_) std::setlocale(LC_CTYPE, "");  // the line editor decodes typed UTF-8 under the user's locale only
    if (tty_in_ && !o_.history.empty()) read_history(o_.history.c_str());
    if (tty_in_)
      fmt::print(stderr, "diffgemma chat · thinking {} · /help for commands\n", chat_.options().thinking ? "on" : "off");
    const SigintCatcher sigint;
    std::string line;
    for (;;) {
      if (!read_line(tty_in_ ? "> " : "", line)) {
        if (g_interrupted == 0) break;  // end of input
        g_interrupted = 0;              // Ctrl-C at the prompt: a fresh line
        std::cin.clear();
        fmt::print("\n");
        std::fflush(stdout);
        continue;
      }
      g_interrupted = 0;  // a Ctrl-C that came after the last answer had ended is not meant for this line
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      if (tty_in_) add_history(line.c_str());
      try {
        if (line[0] == '/') {
          if (!slash(line)) break;
        } else {
          converse(line);
        }
      } catch (const Error& e) {
        fmt::print(stderr, "error: {}\n", e.what());
      }
    }
    if (tty_in_ && !o_.history.empty()) write_history(o_.history.c_str());
    return 0;
  }

 private:
  bool read_line(const char* prompt, std::string& line) {
    if (!tty_in_) return static_cast<bool>(std::getline(std::cin, line));
    char* s = readline(prompt);
    if (s == nullptr) return false;
    line = s;
    std::free(s);
    return true;
  }

  // Ends an exchange whose answer was stopped by Ctrl-C: the partial answer and its user turn are dropped, and the
  // cache is synced back to the conversation before them.
  bool interrupted(const TurnResult& r) {
    if (r.generation != FinishReason::kCancelled) return false;
    g_interrupted = 0;
    chat_.rewind();
    fmt::print("\n");
    std::fflush(stdout);
    const char* clear_line = live_terminal(STDERR_FILENO) ? "\r\033[K" : "";  // the live progress line
    fmt::print(stderr, "{}(interrupted: the exchange was dropped; kv {} tokens)\n", clear_line, chat_.kv_tokens());
    return true;
  }

  void print(const std::string& s, bool dim) {
    if (dim && color_out_) {
      fmt::print("\033[2m{}\033[0m", s);
    } else {
      fmt::print("{}", s);
    }
    std::fflush(stdout);
  }

  void converse(const std::string& text) {
    GenerationProgress progress(o_.quiet, chat_.options().sampler.steps);
    bool in_reasoning = false, any = false;
    ChatEvents ev;
    ev.on_step = [&](const StepInfo& s) { progress.step(s); };
    ev.on_block = [&](const BlockInfo& b) { progress.block(b); };
    if (progress.live()) ev.on_prefill = [&](int64_t done, int64_t total) { progress.prefill(done, total); };
    ev.on_reply = [&](const ReplyEvent& e) {
      if (e.kind == ReplyEvent::Kind::kReasoning) {
        if (o_.hide_thinking) return;
        print(in_reasoning || !any ? e.text : "\n" + e.text, true);
        in_reasoning = any = true;
      } else if (e.kind == ReplyEvent::Kind::kContent) {
        print(in_reasoning ? "\n\n" + e.text : e.text, false);
        in_reasoning = false;
        any = true;
      } else if (e.kind == ReplyEvent::Kind::kToolCall) {
        print(fmt::format("{}[tool call {}] {} {}\n", any ? "\n" : "", e.call.id, e.call.name, e.call.arguments.dump()),
              true);
        any = false;
      } else {
        print(fmt::format("\n[malformed tool call: {}] {}\n", e.error.message, e.error.raw), true);
      }
    };
    ev.cancel = [] { return g_interrupted != 0; };
    TurnResult r = chat_.user(text, &ev);
    if (interrupted(r)) return;
    for (int round = 1; !r.reply.tool_calls.empty(); ++round) {
      if (round > o_.max_tool_rounds) {
        fmt::print(stderr, "(stopped after {} tool rounds; answer the calls or /rewind)\n", o_.max_tool_rounds);
        return;
      }
      for (const ToolCall& c : r.reply.tool_calls) chat_.add_tool_result(c.id, answer_call(c));
      any = in_reasoning = false;
      r = chat_.generate(&ev);
      if (interrupted(r)) return;
    }
    fmt::print("\n");
    if (!o_.quiet)
      fmt::print(stderr, "  [{} · {} tokens · {} forwards · kv {} tokens]\n", r.finish, r.tokens, r.forwards,
                 r.kv_tokens);
  }

  std::string answer_call(const ToolCall& c) {
    const ShellTool* t = find_tool(o_.tools, c.name);
    if (t == nullptr) return fmt::format("error: there is no tool named '{}'", c.name);
    if (!o_.yes) {
      std::string reply;
      const std::string q = fmt::format("run `{}` for {}? [y/N] ", t->command, c.name);
      if (!tty_in_) fmt::print(stderr, "{}(no terminal: declined; use --yes)\n", q);
      if (!tty_in_ || !read_line(q.c_str(), reply) || (reply != "y" && reply != "Y" && reply != "yes"))
        return "error: the user declined to run this tool";
    }
    const std::string out = run_shell_tool(*t, c);
    print(fmt::format("[tool result {}] {}\n", c.id, out.size() > 400 ? out.substr(0, 400) + "…" : out), true);
    return out;
  }

  // Returns false on /exit.
  bool slash(const std::string& line) {
    const size_t sp = line.find(' ');
    const std::string cmd = line.substr(0, sp);
    const size_t arg_at = sp == std::string::npos ? std::string::npos : line.find_first_not_of(' ', sp);
    const std::string arg = arg_at == std::string::npos ? "" : line.substr(arg_at);
    if (cmd == "/exit" || cmd == "/quit" || cmd == "/help" || cmd == "/clear" || cmd == "/rewind")
      DG_CHECK(arg.empty(), "{} takes no argument (it was given '{}')", cmd, arg);
    if (cmd == "/exit" || cmd == "/quit") return false;
    if (cmd == "/help") {
      fmt::print("{}", kHelp);
    } else if (cmd == "/clear") {
      chat_.clear();
      fmt::print(stderr, "(conversation cleared)\n");
    } else if (cmd == "/rewind") {
      if (chat_.rewind()) {
        fmt::print(stderr, "(last exchange undone; kv {} tokens)\n", chat_.kv_tokens());
      } else {
        fmt::print(stderr, "(nothing to rewind)\n");
      }
    } else if (cmd == "/save" || cmd == "/load") {
      DG_CHECK(!arg.empty(), "{} needs a file name", cmd);
      if (cmd == "/save") {
        chat_.save(arg);
      } else {
        chat_.load(arg);
      }
      fmt::print(stderr, "({} {}: {} messages)\n", cmd == "/save" ? "saved" : "loaded", arg,
                 chat_.conversation().messages.size());
    } else if (cmd == "/think") {
      DG_CHECK(arg == "on" || arg == "off", "/think needs on or off");
      chat_.set_thinking(arg == "on");
      chat_.settle();
      fmt::print(stderr, "(thinking {})\n", arg);
    } else {
      fail("unknown command '{}' (/help lists them)", cmd);
    }
    return true;
  }

  ChatSession& chat_;
  const ChatCliOptions& o_;
  bool tty_in_, color_out_;
};

}  // namespace

int run_chat_repl(ChatSession& chat, const ChatCliOptions& o) { return Repl(chat, o).run(); }

}  // namespace dg::cli
