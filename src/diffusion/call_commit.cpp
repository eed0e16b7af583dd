#include "diffusion/call_commit.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace dg {
namespace {

const std::vector<CallTool>* tools_of(const std::shared_ptr<const ToolCallConstraint>& c) {
  DG_CHECK(c != nullptr && c->vocab != nullptr && c->open_id >= 0,
           "a strict tool-call constraint needs a vocabulary table and the id that opens a call");
  return &c->tools;
}

}  // namespace

CallCommit::CallCommit(std::shared_ptr<const ToolCallConstraint> c)
    : c_(std::move(c)), walk_(c_ != nullptr ? c_->vocab : nullptr, CallGrammar(tools_of(c_)), true,
                              "a strict tool call", true) {
  shortest_ = CallGrammar(&c_->tools).closing_bytes();
}

int32_t CallCommit::best_other(int row, const RowLogits& logits) {
  logits(row, row_);
  int32_t pick = -1;
  for (size_t id = 0; id < row_.size(); ++id)
    if (static_cast<int32_t>(id) != c_->open_id && (pick < 0 || row_[id] > row_[static_cast<size_t>(pick)]))
      pick = static_cast<int32_t>(id);
  DG_CHECK(pick >= 0, "a strict tool call: an empty logits row");
  return pick;
}

bool CallCommit::stray(int32_t id) const {
  const JsonVocab& v = *c_->vocab;
  if (id < 0 || static_cast<size_t>(id) >= v.bytes.size() || id == c_->open_id) return false;
  if (std::find(v.stop_ids.begin(), v.stop_ids.end(), id) != v.stop_ids.end()) return false;
  const std::string& b = v.bytes[static_cast<size_t>(id)];
  return b.empty() || (b.size() == 1 && (static_cast<uint8_t>(b[0]) == kQuoteByte ||
                                         static_cast<uint8_t>(b[0]) == kCloseByte));
}

int CallCommit::constrain(std::span<int32_t> block, const RowLogits& logits, int budget) {
  int changed = 0;
  for (size_t r = 0; r < block.size(); ++r) {
    const int32_t own = block[r];
    const int64_t left = static_cast<int64_t>(budget) - static_cast<int64_t>(r);  // rows left, this one included
    if (std::exchange(closed_, false) && c_->vocab->end_id >= 0 && stray(own)) {
      block[r] = c_->vocab->end_id;
      ++changed;
      continue;
    }
    if (!open_) {
      if (own != c_->open_id) continue;
      if (left - 1 < shortest_) {  // the call could not close before the length limit: no call opens
        block[r] = best_other(static_cast<int>(r), logits);
        ++changed;
        continue;
      }
      open_ = true;
      walk_.restart(CallGrammar(&c_->tools));
      continue;
    }
    block[r] = walk_.pick(static_cast<int>(r), own, logits, left);
    changed += block[r] != own;
    if (walk_.grammar().complete()) {
      open_ = false;
      closed_ = true;
    }
  }
  return changed;
}

}  // namespace dg
