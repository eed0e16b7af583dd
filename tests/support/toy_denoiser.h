// A Denoiser over a toy vocabulary without a model, for the commit-time constraints' tests (JSON mode, strict tool
// calls): it writes script[position] at every row with full confidence and `past_end` beyond the script, and every
// other token's logit falls with its id, so a constraint's replacement takes the lowest id it allows.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <vector>

#include "diffusion/generate.h"
#include "ops/row_stats/row_stats.h"

namespace dg::test {

class ToyScriptDenoiser final : public Denoiser {
 public:
  ToyScriptDenoiser(std::vector<int32_t> script, int64_t vocab, int32_t past_end)
      : script_(std::move(script)), vocab_(vocab), past_end_(past_end) {}
  int canvas() const override { return 8; }
  int64_t vocab() const override { return vocab_; }
  void encode(KvCache& kv, std::span<const int32_t> ids) override {
    if (start_ < 0) start_ = kv.len() + static_cast<int64_t>(ids.size());
    kv.commit(static_cast<int64_t>(ids.size()));
  }
  void denoise(const KvCache& kv, std::span<const int32_t> canvas, ScKind, float, float temperature,
               RowStats* stats) override {
    const auto V = static_cast<size_t>(vocab_);
    logits_.assign(canvas.size() * V, 0.0f);
    for (size_t r = 0; r < canvas.size(); ++r) {
      const auto at = static_cast<size_t>(kv.len() - start_) + r;
      for (size_t t = 0; t < V; ++t) logits_[r * V + t] = 1.0f - 0.01f * static_cast<float>(t);
      logits_[r * V + static_cast<size_t>(at < script_.size() ? script_[at] : past_end_)] = 30.0f;
    }
    std::vector<float> tempered(logits_.size());
    row_stats_cpu(logits_.data(), static_cast<int64_t>(canvas.size()), vocab_, temperature, tempered.data(), stats);
  }
  void draw(std::span<const double>, int32_t*) override { FAIL() << "argmax commit draws nothing"; }
  void row_logits(int row, std::vector<float>& out) override {
    ++rows_asked;
    const auto V = static_cast<size_t>(vocab_);
    out.assign(logits_.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(row) * V),
               logits_.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(row + 1) * V));
  }
  int rows_asked = 0;  // row_logits calls: how many rows a constraint looked at

 private:
  std::vector<int32_t> script_;
  int64_t vocab_;
  int32_t past_end_;
  std::vector<float> logits_;
  int64_t start_ = -1;
};

}  // namespace dg::test
