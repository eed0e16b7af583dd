// ToolSet: the declared tools of a conversation with their parameter schemas compiled (diffusion/json_schema.h),
// and the check of a reply's tool calls against them: a malformed call (the grammar), a call to a tool that was not
// declared, arguments that do not match the tool's schema (missing, extra or mistyped). Each problem carries the
// message the model is shown in an error tool response when the reply is repaired (engine/tool_repair.h). A set with a
// strict tool also gives the canvas constraint on the calls (call_constraint, diffusion/call_commit.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "chat/chat_tokens.h"
#include "chat/conversation.h"
#include "chat/stream.h"
#include "diffusion/json_schema.h"
#include "io/tokenizer.h"

namespace dg {

struct JsonVocab;
struct ToolCallConstraint;

// What to do with a reply whose calls fail the check (engine/tool_repair.h): hand it on (off), generate it again
// with another seed (retry), or show the model its errors and let it write the reply again (repair).
enum class ToolCheckMode : uint8_t { kOff, kRetry, kRepair };
ToolCheckMode tool_check_mode_from_name(const std::string& name);  // off | retry | repair; throws otherwise
const char* tool_check_mode_name(ToolCheckMode m);

struct ToolCheckOptions {
  ToolCheckMode mode = ToolCheckMode::kRepair;
  int attempts = 2;  // generations after the first
  bool strict = false;  // every declared tool is strict (ToolSet::from), as `--strict-tools` asks
};

struct ToolProblem {
  std::string name;     // the tool the call names ("" when the call is too malformed to name one)
  std::string message;  // what is wrong, addressed to the model ("unknown tool 'calc' (declared: calculator)")
  std::string raw;      // the call's text, markers included
};

class ToolSet {
 public:
  ToolSet() = default;
  // `strict`: every tool is strict, as is a function declared `"strict": true`: its parameters must compile (an
  // unsupported keyword is an error naming it) and accept an object, and its name must be one a call can hold; any
  // other tool whose schema uses an unsupported keyword is checked by name only. Throws dg::Error on a malformed
  // tools array.
  static ToolSet from(const Json& tools, bool strict = false);

  bool empty() const { return tools_.empty(); }
  bool strict() const;  // some tool is strict
  // The canvas constraint on the calls when some tool is strict (nullptr otherwise): a call names a declared tool
  // (one a call can hold), a strict tool's arguments validate against its schema and any other's are an object.
  // `vocab`: chat_call_vocab's table; `open_id`: <|tool_call>.
  std::shared_ptr<const ToolCallConstraint> call_constraint(std::shared_ptr<const JsonVocab> vocab,
                                                            int32_t open_id) const;
  const JsonSchema* schema(const std::string& name) const;  // nullptr: not declared, or checked by name only
  bool declared(const std::string& name) const;
  // Problems of the reply's calls, in order: malformed calls (Reply::errors), then each call that fails the check.
  std::vector<ToolProblem> check(const Reply& r, const Tokenizer& tok, const ChatTokens& t) const;

 private:
  struct Tool {
    std::string name;
    std::shared_ptr<const JsonSchema> schema;
    bool strict = false;
  };
  std::vector<Tool> tools_;
};

// A call as the model writes it, for messages and raw text: <|tool_call>call:NAME{…}<tool_call|>.
std::string call_text(const ToolCall& c, const Tokenizer& tok, const ChatTokens& t);
// The tool a malformed call's raw text names ("" when none can be read).
std::string raw_call_name(const std::string& raw);

}  // namespace dg
