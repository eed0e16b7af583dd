// A Denoiser that writes a list of scripted replies with full confidence, one per generation, encoding through the
// real model: the sessions and caches run for real, the answers are known.
#pragma once

#include <cstdint>
#include <vector>

#include "diffusion/generate.h"
#include "model/forward.h"

namespace dg::test {

// Writes replies[k] with full confidence for the k-th generation, block after block: an attempt that starts right
// after this denoiser encoded a block continues the reply there; any other attempt (after a sync, a rewind) starts
// the next reply.
class SequenceDenoiser final : public Denoiser {
 public:
  SequenceDenoiser(const Model& m, std::vector<std::vector<int32_t>> replies, int32_t filler)
      : m_(m), replies_(std::move(replies)), filler_(filler) {}
  int canvas() const override { return m_.config().canvas; }
  int64_t vocab() const override { return m_.config().vocab; }
  void encode(KvCache& kv, std::span<const int32_t> ids) override {
    m_.encode(kv, ids);
    encoded_ += static_cast<int64_t>(ids.size());
  }
  void denoise(const KvCache& kv, std::span<const int32_t> canvas, ScKind kind, float, float,
               RowStats* stats) override {
    if (kind != ScKind::kLogits && !(index_ >= 0 && encoded_ > 0 && kv.len() == start_ + encoded_)) {
      ++index_;
      start_ = kv.len();
      encoded_ = 0;
    }
    const std::vector<int32_t>& r = replies_.at(static_cast<size_t>(index_));
    const auto at = static_cast<size_t>(kv.len() - start_);
    last_.assign(canvas.size(), filler_);
    for (size_t i = 0; i < canvas.size(); ++i) {
      if (at + i < r.size()) last_[i] = r[at + i];
      stats[i] = RowStats{last_[i], 0.0f, 1.0f};
    }
  }
  void draw(std::span<const double> u, int32_t* out) override {
    for (size_t i = 0; i < u.size(); ++i) out[i] = last_[i];
  }
  void row_logits(int row, std::vector<float>& out) override {  // the scripted token 30, every other 0
    out.assign(static_cast<size_t>(vocab()), 0.0f);
    out[static_cast<size_t>(last_.at(static_cast<size_t>(row)))] = 30.0f;
  }
  int generations() const { return index_ + 1; }

 private:
  const Model& m_;
  std::vector<std::vector<int32_t>> replies_;
  int32_t filler_;
  int index_ = -1;
  int64_t start_ = 0;    // cache length where the current reply started
  int64_t encoded_ = 0;  // tokens of it this denoiser encoded (committed blocks)
  std::vector<int32_t> last_;
};

}  // namespace dg::test
