#include "diffusion/json_commit.h"

#include <algorithm>

#include "core/error.h"
#include "io/tokenizer.h"

namespace dg {

std::shared_ptr<const JsonVocab> JsonVocab::from(const Tokenizer& tok, std::span<const int32_t> stop_ids,
                                                 int32_t end_id) {
  const int32_t V = tok.vocab_size();
  DG_CHECK(end_id >= 0 && end_id < V, "JSON mode: the end token {} is not an id of the {}-token vocabulary", end_id,
           V);
  auto v = std::make_shared<JsonVocab>();
  v->end_id = end_id;
  v->stop_ids.assign(stop_ids.begin(), stop_ids.end());
  v->bytes.resize(static_cast<size_t>(V));
  for (int32_t id = 0; id < V; ++id) {
    const bool never = tok.is_special(id) || std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end();
    if (!never) v->bytes[static_cast<size_t>(id)] = tok.token_bytes(id);
  }
  return v;
}

JsonCommit::JsonCommit(std::shared_ptr<const JsonVocab> vocab, std::shared_ptr<const JsonSchema> schema)
    : vocab_(std::move(vocab)), schema_(std::move(schema)), grammar_(schema_.get()) {
  DG_CHECK(vocab_ != nullptr && vocab_->end_id >= 0, "JSON mode needs a vocabulary table with an end token");
}

bool JsonCommit::accepts(int32_t id) const { return closing_after(id) >= 0; }

void JsonCommit::first_bytes() {
  for (int b = 0; b < 256; ++b) first_[static_cast<size_t>(b)] = grammar_.accepts(std::string(1, static_cast<char>(b)));
}

bool JsonCommit::may_start(int32_t id) const {
  const std::string& b = vocab_->bytes[static_cast<size_t>(id)];
  return !b.empty() && first_[static_cast<uint8_t>(b[0])];
}

int JsonCommit::closing_after(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_->bytes.size()) return -1;
  const std::string& b = vocab_->bytes[static_cast<size_t>(id)];
  SchemaGrammar g = grammar_;
  return !b.empty() && g.feed(b) ? g.closing_bytes() : -1;
}

void JsonCommit::sort_row(int row, const RowLogits& logits) {
  logits(row, row_);
  const auto V = static_cast<int32_t>(row_.size());
  DG_CHECK(static_cast<size_t>(V) == vocab_->bytes.size(), "JSON mode: a logits row of {} for a {}-token vocabulary",
           V, vocab_->bytes.size());
  order_.resize(static_cast<size_t>(V));
  for (int32_t i = 0; i < V; ++i) order_[static_cast<size_t>(i)] = i;
  const int32_t k = std::min(kTopK, V);
  std::partial_sort(order_.begin(), order_.begin() + k, order_.end(), [&](int32_t a, int32_t b) {
    const float la = row_[static_cast<size_t>(a)], lb = row_[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);  // the argmax convention: the lower id on ties
  });
}

int32_t JsonCommit::best(int row, const RowLogits& logits) {
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
  DG_CHECK(pick >= 0, "JSON mode: no token of the vocabulary continues the JSON text after {} bytes",
           grammar_.bytes());
  return pick;
}

int32_t JsonCommit::closer(int row, int32_t own, const RowLogits& logits) {
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
  DG_CHECK(pick >= 0, "JSON mode: no token of the vocabulary continues the JSON text after {} bytes",
           grammar_.bytes());
  return pick;
}

int JsonCommit::constrain(std::span<int32_t> block, const RowLogits& logits, int budget) {
  int changed = 0;
  for (size_t r = 0; r < block.size(); ++r) {
    if (grammar_.complete()) {
      changed += block[r] != vocab_->end_id;
      block[r] = vocab_->end_id;
      break;
    }
    const int32_t own = block[r];
    const auto& stops = vocab_->stop_ids;
    // Rows left, this one included; only a schema keeps the object within the budget (json_object's answer is cut
    // by it, finish "length", as the wire format has it).
    const int64_t left = schema_ != nullptr ? static_cast<int64_t>(budget) - static_cast<int64_t>(r) : INT64_MAX;
    closing_ = closing_ || std::find(stops.begin(), stops.end(), own) != stops.end() ||
               left <= grammar_.closing_bytes();
    if (!closing_) {
      const int32_t pick = accepts(own) ? own : best(static_cast<int>(r), logits);
      // A token that opens more than the rows after it can close (a key with required properties) starts the walk.
      if (schema_ != nullptr && closing_after(pick) > left - 1)
        closing_ = true;
      else
        block[r] = pick;
    }
    if (closing_) block[r] = closer(static_cast<int>(r), own, logits);
    changed += block[r] != own;
    grammar_.feed(vocab_->bytes[static_cast<size_t>(block[r])]);
  }
  return changed;
}

}  // namespace dg
