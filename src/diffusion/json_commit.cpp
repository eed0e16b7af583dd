#include "diffusion/json_commit.h"

#include <algorithm>

#include "core/error.h"
#include "io/tokenizer.h"

namespace dg {

std::shared_ptr<const JsonVocab> JsonVocab::from(const Tokenizer& tok, std::span<const int32_t> excluded,
                                                 int32_t end_id) {
  const int32_t V = tok.vocab_size();
  DG_CHECK(end_id >= 0 && end_id < V, "JSON mode: the end token {} is not an id of the {}-token vocabulary", end_id,
           V);
  auto v = std::make_shared<JsonVocab>();
  v->end_id = end_id;
  v->bytes.resize(static_cast<size_t>(V));
  for (int32_t id = 0; id < V; ++id) {
    const bool never = tok.is_special(id) || std::find(excluded.begin(), excluded.end(), id) != excluded.end();
    if (!never) v->bytes[static_cast<size_t>(id)] = tok.token_bytes(id);
  }
  return v;
}

JsonCommit::JsonCommit(std::shared_ptr<const JsonVocab> vocab) : vocab_(std::move(vocab)) {
  DG_CHECK(vocab_ != nullptr && vocab_->end_id >= 0, "JSON mode needs a vocabulary table with an end token");
}

bool JsonCommit::accepts(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_->bytes.size()) return false;
  const std::string& b = vocab_->bytes[static_cast<size_t>(id)];
  return !b.empty() && grammar_.accepts(b);
}

int32_t JsonCommit::best(int row, const RowLogits& logits) {
  logits(row, row_);
  const auto V = static_cast<int32_t>(row_.size());
  DG_CHECK(static_cast<size_t>(V) == vocab_->bytes.size(), "JSON mode: a logits row of {} for a {}-token vocabulary",
           V, vocab_->bytes.size());
  // Higher logit first, the lower id on ties (the argmax convention).
  auto before = [&](int32_t a, int32_t b) {
    return row_[static_cast<size_t>(a)] > row_[static_cast<size_t>(b)] ||
           (row_[static_cast<size_t>(a)] == row_[static_cast<size_t>(b)] && a < b);
  };
  order_.resize(static_cast<size_t>(V));
  for (int32_t i = 0; i < V; ++i) order_[static_cast<size_t>(i)] = i;
  const int32_t k = std::min(kTopK, V);
  std::partial_sort(order_.begin(), order_.begin() + k, order_.end(), before);
  for (int32_t i = 0; i < k; ++i)
    if (accepts(order_[static_cast<size_t>(i)])) return order_[static_cast<size_t>(i)];
  int32_t pick = -1;
  for (int32_t id = 0; id < V; ++id)
    if ((pick < 0 || before(id, pick)) && accepts(id)) pick = id;
  DG_CHECK(pick >= 0, "JSON mode: no token of the vocabulary continues the JSON text after {} bytes",
           grammar_.bytes());
  return pick;
}

int JsonCommit::constrain(std::span<int32_t> block, const RowLogits& logits) {
  int changed = 0;
  for (size_t r = 0; r < block.size(); ++r) {
    if (grammar_.complete()) {
      changed += block[r] != vocab_->end_id;
      block[r] = vocab_->end_id;
      break;
    }
    if (!accepts(block[r])) {
      block[r] = best(static_cast<int>(r), logits);
      ++changed;
    }
    grammar_.feed(vocab_->bytes[static_cast<size_t>(block[r])]);
  }
  return changed;
}

}  // namespace dg
