// Strict tool calls (docs/TOOLS.md): a commit-time constraint on every tool call the answer opens. The committed
// rows are watched in order; once <|tool_call> is committed, the rows after it are walked through CallGrammar
// (call_grammar.h) as JSON mode walks its object (json_commit.h): a row whose token cannot continue the call is
// replaced by the row's best token that can. A stop token inside the call (or a control token the call cannot take
// there: pad, a marker, <tool_call|> too early), or a token budget no larger than the bytes that close it, starts
// the closing walk, so the call ends with <tool_call|> within the budget: it always parses, names a declared tool,
// and a strict tool's arguments validate against its schema. The state carries across blocks; after <tool_call|>
// the rows are the model's again until the next <|tool_call>, but for the row right after <tool_call|>: a control
// token there (pad, a stray marker: no text, no call, no stop) becomes the table's end id, <|tool_response>, so the
// reply ends waiting for the results as Gemma's format has it. A <|tool_call> with fewer rows left than the shortest
// call is replaced by the row's best other token. Rows outside calls are otherwise never changed, so a reply without
// calls is the model's.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "diffusion/call_grammar.h"
#include "diffusion/json_commit.h"

namespace dg {

// What SamplerOptions::tool_calls carries: the calls' vocabulary table (JsonVocab::calls, its end id the token that
// follows a call), the id that opens a call and the tools a call may name.
struct ToolCallConstraint {
  std::shared_ptr<const JsonVocab> vocab;
  int32_t open_id = -1;
  std::vector<CallTool> tools;
};

class CallCommit {
 public:
  // Throws dg::Error on a constraint without a vocabulary or without a tool a call can name.
  explicit CallCommit(std::shared_ptr<const ToolCallConstraint> c);
  // Constrains the block about to be committed; returns how many rows changed. `budget`: answer tokens left before
  // the length limit.
  int constrain(std::span<int32_t> block, const RowLogits& logits, int budget);
  bool open() const { return open_; }  // a call is open: its rows so far are committed, <tool_call|> is not
  const CallGrammar& grammar() const { return walk_.grammar(); }

 private:
  int32_t best_other(int row, const RowLogits& logits);  // the row's best token but <|tool_call>
  bool stray(int32_t id) const;  // a control token that may not follow a call: no text, no call, no stop

  std::shared_ptr<const ToolCallConstraint> c_;
  GrammarWalk<CallGrammar> walk_;
  int shortest_ = 0;  // the bytes of the shortest call after <|tool_call>
  bool open_ = false;
  bool closed_ = false;  // the last row committed closed a call
  std::vector<float> row_;
};

}  // namespace dg
