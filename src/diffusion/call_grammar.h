// CallGrammar: the body of one Gemma 4 tool call after <|tool_call>, byte by byte (docs/CHAT.md, "Tool grammar";
// chat/tools_parse.h reads it): `call:`, the name of a declared tool, its arguments in the call syntax
// (SchemaGrammar with Syntax::kCall: a tool with a schema must validate against it, one without may take any
// object), then <tool_call|> (kCloseByte). closing_bytes() is the exact length of the shortest completion, so the
// closing walk of the canvas constraint (call_commit.h) ends the call within that many tokens. Copied per candidate
// token: no heap.
#pragma once

#include <bitset>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "diffusion/json_schema_grammar.h"

namespace dg {

// A tool a constrained call may name. schema: its arguments must validate against it (a strict tool); nullptr: any
// object of named values.
struct CallTool {
  std::string name;
  std::shared_ptr<const JsonSchema> schema;
};

class CallGrammar {
 public:
  static constexpr int kMaxTools = 128;
  static constexpr std::string_view kHead = "call:";

  // `tools` outlives the grammar. Throws dg::Error when no tool can be named in a call (a name the call syntax
  // cannot hold: empty, or with whitespace, '{', '}', ',') or a schema's root does not accept an object.
  explicit CallGrammar(const std::vector<CallTool>* tools);
  // Whether a call can name `name` (chat/tools_parse.h reads a name up to '{', whitespace, '}', ',' or <|"|>).
  static bool callable(const std::string& name);

  bool feed(uint8_t byte);  // false (and the state unchanged) when the byte cannot continue a valid prefix
  bool feed(std::string_view bytes);
  bool accepts(std::string_view bytes) const {
    CallGrammar g = *this;
    return g.feed(bytes);
  }
  bool complete() const { return part_ == Part::kDone; }  // <tool_call|> has been written
  int closing_bytes() const;
  int64_t bytes() const { return bytes_; }
  int tool() const { return tool_; }  // the tool the call names, once its '{' is written; -1 before

 private:
  enum class Part : uint8_t { kHead, kName, kArgs, kClose, kDone };
  bool step(uint8_t c);
  int args_min(int tool) const;  // the shortest arguments object of a tool, braces included

  const std::vector<CallTool>* tools_;
  Part part_ = Part::kHead;
  int pos_ = 0;  // kHead: bytes of "call:" written; kName: bytes of the name
  std::bitset<kMaxTools> cand_;  // kName: the callable tools whose names the bytes so far spell the start of
  int tool_ = -1;
  SchemaGrammar args_;
  int64_t bytes_ = 0;
};

}  // namespace dg
