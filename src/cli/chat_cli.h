// `diffgemma chat`: shared pieces of the interactive REPL (chat_repl.cpp) and the JSONL mode (chat_jsonl.cpp):
// the options, shell tools exposed to the model (chat_tool.cpp), and the tool-round loop.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "cli/app.h"
#include "cli/sampler_options.h"
#include "engine/chat.h"

namespace dg::cli {

// --tool NAME[:DESCRIPTION]=COMMAND: a shell command the model may call with one string argument, `input`
// (given to the command as "$1" and on stdin).
struct ShellTool {
  std::string name, description, command;
};
ShellTool parse_tool_spec(const std::string& spec);  // throws dg::Error naming the bad spec
Json tool_declaration(const ShellTool& t);           // the OpenAI tools[] entry
// Runs the command for a call; returns what the model sees (output, plus the exit status when non-zero).
std::string run_shell_tool(const ShellTool& t, const ToolCall& call);
const ShellTool* find_tool(const std::vector<ShellTool>& tools, const std::string& name);

struct ChatCliOptions {
  ModelOptions model;
  SamplerFlags sampler;
  ToolCheckFlags tool_check;
  std::string oplog;  // op-log file ("" : none)
  bool think = false;
  std::string system;
  std::vector<std::string> tool_specs;
  std::vector<ShellTool> tools;  // parsed from tool_specs
  bool yes = false;              // run tools without asking
  bool jsonl = false;
  bool quiet = false;
  bool hide_thinking = false;
  std::string history;  // line-editing history file ("" : none)
  int max_tool_rounds = 8;
  int64_t context = 8192;  // --ctx: tokens the conversation's KV cache holds
};

int run_chat_repl(ChatSession& chat, const ChatCliOptions& o);
int run_chat_jsonl(ChatSession& chat, const ChatCliOptions& o, std::istream& in, std::ostream& out);

}  // namespace dg::cli
