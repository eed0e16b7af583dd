#include "diffusion/json_commit.h"

#include <algorithm>

#include "core/error.h"
#include "diffusion/call_grammar.h"
#include "io/tokenizer.h"

namespace dg {
namespace {

bool listed(std::span<const int32_t> ids, int32_t id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }

}  // namespace

std::shared_ptr<const JsonVocab> JsonVocab::from(const Tokenizer& tok, std::span<const int32_t> stop_ids,
                                                 int32_t end_id) {
  const int32_t V = tok.vocab_size();
  DG_CHECK(end_id >= 0 && end_id < V, "JSON mode: the end token {} is not an id of the {}-token vocabulary", end_id,
           V);
  auto v = std::make_shared<JsonVocab>();
  v->end_id = end_id;
  v->stop_ids.assign(stop_ids.begin(), stop_ids.end());
  v->bytes.resize(static_cast<size_t>(V));
  for (int32_t id = 0; id < V; ++id)
    if (!tok.is_special(id) && !listed(stop_ids, id)) v->bytes[static_cast<size_t>(id)] = tok.token_bytes(id);
  return v;
}

std::shared_ptr<const JsonVocab> JsonVocab::calls(const Tokenizer& tok, std::span<const int32_t> stop_ids,
                                                  int32_t quote, int32_t close, int32_t end) {
  const int32_t V = tok.vocab_size();
  for (const int32_t id : {quote, close, end})
    DG_CHECK(id >= 0 && id < V, "tool calls: the marker {} is not an id of the {}-token vocabulary", id, V);
  auto v = std::make_shared<JsonVocab>();
  v->end_id = end;
  v->stop_ids.assign(stop_ids.begin(), stop_ids.end());
  v->bytes.resize(static_cast<size_t>(V));
  for (int32_t id = 0; id < V; ++id) {
    if (tok.is_special(id) || listed(stop_ids, id)) continue;
    std::string b = tok.token_bytes(id);
    if (b.find(static_cast<char>(kQuoteByte)) == std::string::npos &&
        b.find(static_cast<char>(kCloseByte)) == std::string::npos)
      v->bytes[static_cast<size_t>(id)] = std::move(b);
  }
  v->bytes[static_cast<size_t>(quote)] = std::string(1, static_cast<char>(kQuoteByte));
  v->bytes[static_cast<size_t>(close)] = std::string(1, static_cast<char>(kCloseByte));
  return v;
}

template <class G>
GrammarWalk<G>::GrammarWalk(std::shared_ptr<const JsonVocab> vocab, G grammar, bool bounded, const char* what,
                            bool close_on_control)
    : vocab_(std::move(vocab)), grammar_(std::move(grammar)), bounded_(bounded), what_(what),
      close_on_control_(close_on_control) {
  DG_CHECK(vocab_ != nullptr, "{} needs a vocabulary table", what_);
}

template <class G>
void GrammarWalk<G>::restart(G grammar) {
  grammar_ = std::move(grammar);
  closing_ = false;
}

template <class G>
void GrammarWalk<G>::first_bytes() {
  for (int b = 0; b < 256; ++b) first_[static_cast<size_t>(b)] = grammar_.accepts(std::string(1, static_cast<char>(b)));
}

template <class G>
bool GrammarWalk<G>::control(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_->bytes.size()) return false;
  const std::string& b = vocab_->bytes[static_cast<size_t>(id)];
  return b.empty() || (b.size() == 1 && static_cast<uint8_t>(b[0]) == kCloseByte);
}

template <class G>
bool GrammarWalk<G>::may_start(int32_t id) const {
  const std::string& b = vocab_->bytes[static_cast<size_t>(id)];
  return !b.empty() && first_[static_cast<uint8_t>(b[0])];
}

template <class G>
int GrammarWalk<G>::closing_after(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_->bytes.size()) return -1;
  const std::string& b = vocab_->bytes[static_cast<size_t>(id)];
  G g = grammar_;
  return !b.empty() && g.feed(b) ? g.closing_bytes() : -1;
}

template <class G>
void GrammarWalk<G>::sort_row(int row, const RowLogits& logits) {
  logits(row, row_);
  const auto V = static_cast<int32_t>(row_.size());
  DG_CHECK(static_cast<size_t>(V) == vocab_->bytes.size(), "{}: a logits row of {} for a {}-token vocabulary", what_,
           V, vocab_->bytes.size());
  order_.resize(static_cast<size_t>(V));
  for (int32_t i = 0; i < V; ++i) order_[static_cast<size_t>(i)] = i;
  const int32_t k = std::min(kTopK, V);
  std::partial_sort(order_.begin(), order_.begin() + k, order_.end(), [&](int32_t a, int32_t b) {
    const float la = row_[static_cast<size_t>(a)], lb = row_[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);  // the argmax convention: the lower id on ties
  });
}

template <class G>
int32_t GrammarWalk<G>::best(int row, const RowLogits& logits) {
  sort_row(row, logits);
  const auto V = static_cast<int32_t>(row_.size());
  for (int32_t i = 0; i < std::min(kTopK, V); ++i)
    if (accepts(order_[static_cast<size_t>(i)])) return order_[static_cast<size_t>(i)];
  int32_t pick = -1;
  first_bytes();
  for (int32_t id = 0; id < V; ++id)
    if ((pick < 0 || row_[static_cast<size_t>(id)] > row_[static_cast<size_t>(pick)]) && may_start(id) &&
        accepts(id))
      pick = id;
  DG_CHECK(pick >= 0, "{}: no token of the vocabulary continues the text after {} bytes", what_, grammar_.bytes());
  return pick;
}

template <class G>
int32_t GrammarWalk<G>::closer(int row, int32_t own, const RowLogits& logits) {
  const int now = grammar_.closing_bytes();
  const int own_after = closing_after(own);
  if (own_after >= 0 && own_after < now) return own;
  sort_row(row, logits);
  const auto V = static_cast<int32_t>(row_.size());
  for (int32_t i = 0; i < std::min(kTopK, V); ++i) {
    const int after = closing_after(order_[static_cast<size_t>(i)]);
    if (after >= 0 && after < now) return order_[static_cast<size_t>(i)];
  }
  // The whole vocabulary: a token that gets closer, the higher logit first; failing that (a pending surrogate pair
  // or UTF-8 tail that no single token shortens), the fewest bytes left.
  auto better = [&](int32_t a, int a_after, int32_t b, int b_after) {
    const bool pa = a_after < now, pb = b_after < now;
    if (pa != pb) return pa;
    if (!pa && a_after != b_after) return a_after < b_after;
    return row_[static_cast<size_t>(a)] > row_[static_cast<size_t>(b)];  // ties: the lower id, seen first
  };
  int32_t pick = -1;
  int pick_after = 0;
  first_bytes();
  for (int32_t id = 0; id < V; ++id) {
    if (!may_start(id)) continue;
    const int after = closing_after(id);
    if (after >= 0 && (pick < 0 || better(id, after, pick, pick_after))) {
      pick = id;
      pick_after = after;
    }
  }
  DG_CHECK(pick >= 0, "{}: no token of the vocabulary continues the text after {} bytes", what_, grammar_.bytes());
  return pick;
}

template <class G>
int32_t GrammarWalk<G>::pick(int row, int32_t own, const RowLogits& logits, int64_t left) {
  // Only a bounded walk keeps the text within the budget (json_object's answer is cut by it, finish "length", as the
  // wire format has it).
  if (!bounded_) left = INT64_MAX;
  closing_ = closing_ || listed(vocab_->stop_ids, own) || left <= grammar_.closing_bytes() ||
             (close_on_control_ && control(own) && !accepts(own));
  int32_t out = own;
  if (!closing_) {
    const int32_t p = accepts(own) ? own : best(row, logits);
    // A token that opens more than the rows after it can close (a key with required properties) starts the walk.
    if (bounded_ && closing_after(p) > left - 1)
      closing_ = true;
    else
      out = p;
  }
  if (closing_) out = closer(row, own, logits);
  grammar_.feed(vocab_->bytes[static_cast<size_t>(out)]);
  return out;
}

template class GrammarWalk<SchemaGrammar>;
template class GrammarWalk<CallGrammar>;

JsonCommit::JsonCommit(std::shared_ptr<const JsonVocab> vocab, std::shared_ptr<const JsonSchema> schema)
    : schema_(std::move(schema)), walk_(std::move(vocab), SchemaGrammar(schema_.get()), schema_ != nullptr,
                                        "JSON mode") {
  DG_CHECK(walk_.vocab().end_id >= 0, "JSON mode needs a vocabulary table with an end token");
}

int JsonCommit::constrain(std::span<int32_t> block, const RowLogits& logits, int budget) {
  int changed = 0;
  const int32_t end_id = walk_.vocab().end_id;
  for (size_t r = 0; r < block.size(); ++r) {
    if (walk_.grammar().complete()) {
      changed += block[r] != end_id;
      block[r] = end_id;
      break;
    }
    const int32_t own = block[r];
    // Rows left, this one included.
    block[r] = walk_.pick(static_cast<int>(r), own, logits, static_cast<int64_t>(budget) - static_cast<int64_t>(r));
    changed += block[r] != own;
  }
  return changed;
}

}  // namespace dg
