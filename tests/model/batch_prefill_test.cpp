// Prompts that arrive together are prefilled together (BatchRunner, the engine of `bench --serve`): one encoder
// pass a round over several prompts' tokens, within the round's budget, shared in turns. Under a scripted load of
// one long prompt ahead of three short ones on the embedded model, the short ones start denoising first, the long
// one is never starved, and every request's tokens are those of generate() alone.
#include <gtest/gtest.h>

#include <algorithm>

#include "diffusion/batch.h"
#include "model/model_harness.h"
#include "support/paths.h"

namespace dg::test {
namespace batch_prefill_test {

// A ModelBatchDenoiser that records the rows of every encoder pass (sequence by sequence).
class Recording final : public BatchDenoiser {
 public:
  explicit Recording(const Model& m) : d_(m) {}
  int canvas() const override { return d_.canvas(); }
  int64_t vocab() const override { return d_.vocab(); }
  int64_t max_positions() const override { return d_.max_positions(); }
  void encode(KvCache& kv, std::span<const int32_t> ids) override {
    passes.push_back({static_cast<int64_t>(ids.size())});
    d_.encode(kv, ids);
  }
  void encode_batch(std::span<const EncodeSeq> seqs) override {
    passes.emplace_back();
    for (const EncodeSeq& s : seqs) passes.back().push_back(static_cast<int64_t>(s.ids.size()));
    d_.encode_batch(seqs);
  }
  int open() override { return d_.open(); }
  void close(int seq) override { d_.close(seq); }
  void denoise(std::span<const BatchItem> items) override { d_.denoise(items); }
  void row_logits(int seq, int row, std::vector<float>& out) override { d_.row_logits(seq, row, out); }

  std::vector<std::vector<int64_t>> passes;

 private:
  ModelBatchDenoiser d_;
};

TEST(BatchedPrefill, ShortPromptsBehindALongOneStartFirstAndTheLongOneIsNotStarved) {
  ModelRig e(source_path("models/dg-tiny"));
  const int64_t V = e.ck.config.vocab;
  constexpr int64_t kBudget = 32;
  const std::vector<int> lengths = {300, 10, 10, 10};
  std::vector<std::vector<int32_t>> prompts;
  std::vector<SamplerOptions> opts;
  for (size_t i = 0; i < lengths.size(); ++i) {
    prompts.push_back(pattern_ids(lengths[i], static_cast<int>(i) + 1, V));
    SamplerOptions o = make_sampler_options(SamplerProfile::kContract, e.ck.generation, e.ck.config.pad_id, 2);
    o.seed = 30 + i;
    o.steps = 3;
    o.max_new_tokens = 32;
    o.confidence_threshold = 1e-30;
    opts.push_back(o);
  }
  Recording d(*e.model);
  BatchRunner runner(d, BatchOptions{8, kBudget});
  std::vector<KvCache> caches;
  for (size_t i = 0; i < prompts.size(); ++i) caches.push_back(e.new_cache());
  int round = 0;
  std::vector<int> first_step(prompts.size(), -1);
  std::vector<GenerateEvents> events(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    events[i].on_step = [&, i](const StepInfo&, const StepView&) {
      if (first_step[i] < 0) first_step[i] = round;
    };
    runner.add(caches[i], prompts[i], opts[i], &events[i]);
  }
  std::vector<GenerateResult> together(prompts.size());
  for (; !runner.idle(); ++round) {
    runner.round();
    for (BatchRunner::Done& done : runner.take_finished()) together[static_cast<size_t>(done.id)] = done.result;
  }

  // Round 0: the long prompt takes the budget; round 1: the short ones (30 tokens) and 2 more of the long one, in
  // one pass; then 32 a round until its 300 are in.
  for (size_t i = 1; i < prompts.size(); ++i) EXPECT_EQ(first_step[i], 1) << "short prompt " << i;
  EXPECT_EQ(first_step[0], (300 + 30 + kBudget - 1) / kBudget - 1) << "the long prompt, every round served";
  ASSERT_GE(d.passes.size(), 2u);
  EXPECT_EQ(d.passes[1], (std::vector<int64_t>{10, 10, 10, 2})) << "prompts arriving together, one encoder pass";
  for (const std::vector<int64_t>& pass : d.passes) {
    int64_t prompt_rows = 0;
    for (const int64_t n : pass) prompt_rows += n;
    EXPECT_LE(prompt_rows, kBudget + static_cast<int64_t>(prompts.size()) * e.ck.config.canvas)
        << "the budget plus the committed blocks";
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    KvCache kv = e.new_cache();
    const GenerateResult alone = generate(*e.model, kv, prompts[i], opts[i]);
    EXPECT_EQ(together[i].tokens, alone.tokens) << "request " << i;
    EXPECT_EQ(together[i].forwards, alone.forwards) << "request " << i;
  }
}

}  // namespace batch_prefill_test
}  // namespace dg::test
