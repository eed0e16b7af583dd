// JSON mode (response_format json_object; json_schema with a schema, json_schema_grammar.h): a commit-time
// constraint that makes the answer one JSON object. When an attempt's block is about to be committed, its rows are
// walked in order through the grammar; the first row whose token cannot continue the JSON text is replaced by that
// row's best token that can (the row's top kTopK logits first, then the whole vocabulary), and the walk goes on.
// Once the object has closed, the next row becomes the end token, so the usual stop-token trim ends the answer there.
// Control and special tokens are never accepted. When the model writes a stop token while the object is still open,
// or (with a schema) the token budget left is no more than the bytes that close it, the constraint closes it: then
// each row takes its highest-logit token among those that bring the text strictly closer to a complete object
// (closing_bytes), so the answer ends within a few tokens (with a schema: within the budget, never cut by it). The
// logits rows come from the driver (the last denoise forward), only for rows that need a replacement.
// GrammarWalk is that row-by-row walk over any grammar with SchemaGrammar's interface: JsonCommit runs it over the
// answer, CallCommit (call_commit.h) over each tool call the answer opens.
#pragma once

#include <array>
#include <climits>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "diffusion/json_schema_grammar.h"

namespace dg {

class Tokenizer;

// The softcapped logits [vocab] of one row of the last denoise step.
using RowLogits = std::function<void(int row, std::vector<float>& out)>;

// What JSON mode needs to know of the vocabulary: each id's bytes in the decoded text ("" for ids never allowed
// inside JSON) and the id that ends the answer once the object has closed.
struct JsonVocab {
  std::vector<std::string> bytes;  // [vocab]
  std::vector<int32_t> stop_ids;   // the model writing one of these while the object is open: close it
  int32_t end_id = -1;

  // Every id of `tok` but its special tokens (markers, control tokens) and the stop ids with its decoded bytes
  // (a byte-fallback token: its one byte). Throws dg::Error when end_id is not an id of the vocabulary.
  static std::shared_ptr<const JsonVocab> from(const Tokenizer& tok, std::span<const int32_t> stop_ids,
                                               int32_t end_id);
  // The table of a tool call's body (call_grammar.h): the same ids with their bytes, <|"|> (`quote`) as kQuoteByte
  // and <tool_call|> (`close`) as kCloseByte; ids whose bytes hold either byte are never allowed. `end`: the id that
  // follows a call (<|tool_response>, call_commit.h).
  static std::shared_ptr<const JsonVocab> calls(const Tokenizer& tok, std::span<const int32_t> stop_ids,
                                                int32_t quote, int32_t close, int32_t end);
};

// The walk over one text that a grammar G constrains (SchemaGrammar, CallGrammar: feed, accepts, closing_bytes,
// complete, bytes).
template <class G>
class GrammarWalk {
 public:
  static constexpr int kTopK = 64;  // candidates by logit tried before the whole vocabulary is searched

  // `bounded`: G's closing_bytes() is exact, so the walk closes the text before the length limit cuts it.
  // `what` names the constraint in errors ("JSON mode"). `close_on_control`: a row whose token the grammar refuses and
  // that is no text (a control token: pad, a marker, the text's own end too early) starts the closing walk as a stop
  // token does (the model is done with the text).
  GrammarWalk(std::shared_ptr<const JsonVocab> vocab, G grammar, bool bounded, const char* what,
              bool close_on_control = false);
  // Row `row`'s token: `own` when it continues the text, else the row's best token that does (in the closing mode:
  // that brings the text closer to its end); fed to the grammar. `left`: rows left before the length limit, this
  // one included. Throws dg::Error when no token of the vocabulary can continue the text (a vocabulary without
  // ASCII).
  int32_t pick(int row, int32_t own, const RowLogits& logits, int64_t left);
  void restart(G grammar);  // a new text
  const G& grammar() const { return grammar_; }
  const JsonVocab& vocab() const { return *vocab_; }

 private:
  bool accepts(int32_t id) const { return closing_after(id) >= 0; }
  // The bytes that would still close the text after `id`; -1 when the grammar refuses it.
  int closing_after(int32_t id) const;
  int32_t best(int row, const RowLogits& logits);
  int32_t closer(int row, int32_t own, const RowLogits& logits);  // the closing mode's pick
  void sort_row(int row, const RowLogits& logits);                // row_ and order_ (top kTopK first)
  // Whole-vocabulary scans first skip the tokens whose first byte the grammar refuses.
  void first_bytes();
  bool may_start(int32_t id) const;
  bool control(int32_t id) const;  // no text in the table (a special token), or <tool_call|>

  std::shared_ptr<const JsonVocab> vocab_;
  G grammar_;
  bool bounded_;
  const char* what_;
  bool close_on_control_;
  bool closing_ = false;  // a stop token inside the text, or the budget: the walk closes it
  std::vector<float> row_;
  std::vector<int32_t> order_;
  std::array<bool, 256> first_{};
};

class JsonCommit {
 public:
  static constexpr int kTopK = GrammarWalk<SchemaGrammar>::kTopK;

  // `schema`: the object must also validate against it (json_schema.h); nullptr: any JSON object.
  explicit JsonCommit(std::shared_ptr<const JsonVocab> vocab, std::shared_ptr<const JsonSchema> schema = nullptr);
  // Constrains the block about to be committed and advances the grammar over it; returns how many rows changed.
  // Throws dg::Error when no token of the vocabulary can continue the text (a vocabulary without ASCII).
  // `budget`: answer tokens left before the length limit. With a schema, once a row's remaining budget is no more
  // than the bytes that close the object, the walk closes it (every token is at least one byte), so the limit never
  // cuts it; without one (json_object) the limit cuts the object as it stands.
  int constrain(std::span<int32_t> block, const RowLogits& logits, int budget = INT32_MAX);
  const SchemaGrammar& grammar() const { return walk_.grammar(); }
  bool has_schema() const { return schema_ != nullptr; }

 private:
  std::shared_ptr<const JsonSchema> schema_;
  GrammarWalk<SchemaGrammar> walk_;
};

}  // namespace dg
