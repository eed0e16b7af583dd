// `diffgemma chat`: a conversation with the model in the Gemma 4 chat format, interactive (line editing, history,
// slash commands, shell tools) or driven by JSONL commands (--jsonl). The KV cache follows the conversation:
// each turn encodes only what is new, and /rewind restores the cache exactly.
#include <cstdlib>
#include <iostream>

#include <fmt/format.h>

#include "cli/chat_cli.h"
#include "cli/option_checks.h"
#include "engine/oplog.h"

namespace dg::cli {
namespace {

std::string default_history() {
  const char* home = std::getenv("HOME");
  return home != nullptr && *home != '\0' ? std::string(home) + "/.diffgemma_history" : std::string();
}

// The --tool specs, checked as the command line is (a usage error, before the model loads): each well formed, and
// no name declared twice (a call names its tool: the second command would never run).
void parse_tools(ChatCliOptions& o) {
  for (const std::string& spec : o.tool_specs) {
    try {
      o.tools.push_back(parse_tool_spec(spec));
    } catch (const Error& e) {
      throw CLI::ValidationError(e.what());
    }
    for (size_t i = 0; i + 1 < o.tools.size(); ++i)
      if (o.tools[i].name == o.tools.back().name)
        throw CLI::ValidationError(fmt::format("--tool '{}': a tool named '{}' is already declared ('{}')", spec,
                                               o.tools.back().name, o.tool_specs[i]));
  }
}

void run_chat(ChatCliOptions& o) {
  EngineOptions eo = engine_options(o.model);
  eo.context = o.context;
  auto engine = EngineCore::open(eo);
  ChatOptions co;
  co.thinking = o.think;
  co.sampler = o.sampler.resolve(*engine);
  co.tool_check = o.tool_check.resolve();
  std::unique_ptr<OpLog> oplog;
  if (!o.oplog.empty()) {
    oplog = std::make_unique<OpLog>(o.oplog);
    co.oplog = oplog.get();
  }
  ChatSession chat(*engine, co);
  if (!o.system.empty()) chat.set_system(o.system);
  if (!o.tools.empty()) {
    Json tools = Json::array();
    for (const ShellTool& t : o.tools) tools.push_back(tool_declaration(t));
    chat.set_tools(tools);
  }
  chat.settle();
  if (o.jsonl) {
    run_chat_jsonl(chat, o, std::cin, std::cout);
  } else {
    run_chat_repl(chat, o);
  }
}

}  // namespace

void register_chat(CLI::App& app) {
  auto o = std::make_shared<ChatCliOptions>();
  o->history = default_history();
  CLI::App* cmd = app.add_subcommand("chat", "talk with the model: an interactive REPL, or JSONL commands (--jsonl)");
  add_model_options(cmd, o->model);
  cmd->add_flag("--think,!--no-think", o->think, "thinking mode: the model reasons in its thought channel first")
      ->capture_default_str();
  cmd->add_option("--system", o->system, "system prompt");
  cmd->add_option("--tool", o->tool_specs,
                  "expose a shell command as a tool: NAME=CMD or NAME:DESCRIPTION=CMD (its string argument `input` "
                  "is \"$1\" and stdin); each call asks for confirmation unless --yes")
      ->type_name("NAME=CMD");
  cmd->add_flag("--yes", o->yes, "run tool calls without asking");
  cmd->add_option("--max-tool-rounds", o->max_tool_rounds, "tool rounds per user turn (0: none are run)")
      ->check(non_negative_int())
      ->capture_default_str();
  cmd->add_option("--ctx", o->context,
                  "tokens the conversation may hold, answers and their canvas included (the CUDA cache is allocated "
                  "for them up front; at most the model's positions)")
      ->check(positive_int())
      ->capture_default_str();
  cmd->add_flag("--jsonl", o->jsonl, "read JSON commands from stdin, write JSON events to stdout (see README)");
  cmd->add_flag("--hide-thinking", o->hide_thinking, "do not print the reasoning (REPL)");
  cmd->add_option("--history", o->history, "line-editing history file (\"\": none)")->capture_default_str();
  cmd->add_flag("-q,--quiet", o->quiet, "no progress on stderr");
  cmd->add_option("--oplog", o->oplog,
                  "append every engine op of the session to this file (JSONL; `diffgemma replay FILE` re-runs it)");
  o->tool_check.add_to(cmd);
  o->sampler.add_to(cmd);
  cmd->callback([o] {
    parse_tools(*o);
    run_chat(*o);
  });
}

}  // namespace dg::cli
