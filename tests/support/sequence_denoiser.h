// A Denoiser that writes a list of scripted replies with full confidence, one per generation, encoding through the
// real model: the sessions and caches run for real, the answers are known.
#pragma once

#include <cstdint>
#include <vector>

#include "diffusion/generate.h"
#include "model/forward.h"

namespace dg::test {

// Writes replies[k] with full confidence for the k-th generation (each reply fits one block: a generation is one
// attempt, which starts with a step that does not self-condition on logits).
class SequenceDenoiser final : public Denoiser {
 public:
  SequenceDenoiser(const Model& m, std::vector<std::vector<int32_t>> replies, int32_t filler)
      : m_(m), replies_(std::move(replies)), filler_(filler) {}
  int canvas() const override { return m_.config().canvas; }
  int64_t vocab() const override { return m_.config().vocab; }
  void encode(KvCache& kv, std::span<const int32_t> ids) override { m_.encode(kv, ids); }
  void denoise(const KvCache&, std::span<const int32_t> canvas, ScKind kind, float, float,
               RowStats* stats) override {
    if (kind != ScKind::kLogits) ++index_;
    const std::vector<int32_t>& r = replies_.at(static_cast<size_t>(index_));
    last_.assign(canvas.size(), filler_);
    for (size_t i = 0; i < canvas.size(); ++i) {
      if (i < r.size()) last_[i] = r[i];
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
  std::vector<int32_t> last_;
};

}  // namespace dg::test
