// A committed block encoded in the forward of the next block's first step (Model::commit_denoise_ids and
// encode_denoise_batch; --fused-commit): on the CPU reference the same logits and the same cache, bit for bit, as
// the encode pass and the denoise step apart, including across a wrapped sliding-window ring and with the encoder's
// own layer scalars; generate() with it commits the same tokens and leaves the same cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "diffusion/batch.h"
#include "diffusion/generate.h"
#include "diffusion/options.h"
#include "model/model_harness.h"
#include "support/paths.h"

namespace dg::test {
namespace fused_commit_test {

struct Case {
  std::string dir;
  int64_t ring_slack;  // small: the commit's writes wrap the sliding rings past what the canvas reads
  bool own_encoder_scalars;  // the checkpoint's encoder layer scalars differ from its decoder's
};

std::string case_name(const ::testing::TestParamInfo<Case>& p) {
  std::string name =
      p.param.dir.substr(p.param.dir.find_last_of('/') + 1) + "_slack" + std::to_string(p.param.ring_slack);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

class FusedCommit : public ::testing::TestWithParam<Case> {
 protected:
  KvCache cache(const ModelRig& e) const {
    KvOptions o;
    e.be->configure_kv(o, 4096);
    o.ring_slack = GetParam().ring_slack;
    return KvCache(e.ck.config, o);
  }
};

bool scalars_differ(const ModelRig& e) {
  for (const LayerWeights& l : e.weights.layers)
    if (l.encoder_scalar != l.decoder_scalar) return true;
  return false;
}

TEST_P(FusedCommit, OneForwardGivesTheTwoPassesLogitsAndCache) {
  ModelRig e(source_path(GetParam().dir));
  const ModelConfig& cfg = e.ck.config;
  ASSERT_EQ(scalars_differ(e), GetParam().own_encoder_scalars) << "the checkpoint's layer scalars changed";
  const int C = cfg.canvas;
  const std::vector<int32_t> prompt = pattern_ids(static_cast<int>(cfg.window) + 5, 1, cfg.vocab);
  const std::vector<int32_t> block = pattern_ids(C, 2, cfg.vocab), canvas = pattern_ids(C, 3, cfg.vocab);
  for (const ScKind kind : {ScKind::kSelfEmbed, ScKind::kZero}) {
    KvCache apart = cache(e), fused = cache(e);
    e.model->encode(apart, prompt);
    e.model->encode(fused, prompt);
    const Tensor ids = e.be->ids(canvas);
    Tensor la = e.be->alloc_f32(Shape{C, cfg.vocab}), lf = e.be->alloc_f32(Shape{C, cfg.vocab});
    e.model->encode(apart, block);
    e.model->denoise_ids(apart, ids, ScInput{kind}, la);
    e.model->commit_denoise_ids(fused, block, ids, ScInput{kind}, lf);
    EXPECT_EQ(fused.len(), apart.len());
    EXPECT_EQ(fused.fingerprint(), apart.fingerprint()) << "the committed block's K/V differ";
    EXPECT_EQ(to_host(*e.be, lf), to_host(*e.be, la)) << "the canvas's logits differ";
  }
}

TEST_P(FusedCommit, ABatchedForwardGivesEachSequenceItsTwoPassesRows) {
  ModelRig e(source_path(GetParam().dir));
  const ModelConfig& cfg = e.ck.config;
  const int C = cfg.canvas;
  // Sequence 0 commits a block and denoises the canvas after it; 1 only encodes; 2 only denoises.
  std::vector<KvCache> apart, fused;
  for (int i = 0; i < 3; ++i) {
    apart.push_back(cache(e));
    fused.push_back(cache(e));
    const std::vector<int32_t> prompt = pattern_ids(static_cast<int>(cfg.window) + 3 * i, 10 + i, cfg.vocab);
    e.model->encode(apart.back(), prompt);
    e.model->encode(fused.back(), prompt);
  }
  const std::vector<int32_t> block0 = pattern_ids(C, 20, cfg.vocab), block1 = pattern_ids(C / 2, 21, cfg.vocab);
  const std::vector<int32_t> canvas0 = pattern_ids(C, 22, cfg.vocab), canvas2 = pattern_ids(C, 23, cfg.vocab);
  const EncodeSeq enc_apart[] = {{&apart[0], block0}, {&apart[1], block1}};
  e.model->encode_batch(enc_apart);
  const DenoiseSeq dec_apart[] = {{&apart[0], canvas0, ScInput{ScKind::kSelfEmbed}},
                                  {&apart[2], canvas2, ScInput{ScKind::kSelfEmbed}}};
  const std::vector<float> want = to_host(*e.be, e.model->denoise_batch(dec_apart));
  const EncodeSeq enc_fused[] = {{&fused[0], block0}, {&fused[1], block1}};
  const DenoiseSeq dec_fused[] = {{&fused[0], canvas0, ScInput{ScKind::kSelfEmbed}},
                                  {&fused[2], canvas2, ScInput{ScKind::kSelfEmbed}}};
  EXPECT_EQ(to_host(*e.be, e.model->encode_denoise_batch(enc_fused, dec_fused)), want);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(fused[i].len(), apart[i].len()) << "sequence " << i;
    EXPECT_EQ(fused[i].fingerprint(), apart[i].fingerprint()) << "sequence " << i;
  }
}

TEST_P(FusedCommit, GenerateCommitsTheSameTokensAndLeavesTheSameCache) {
  ModelRig e(source_path(GetParam().dir));
  const ModelConfig& cfg = e.ck.config;
  const std::vector<int32_t> prompt = pattern_ids(static_cast<int>(cfg.window) + 7, 4, cfg.vocab);
  for (const SamplerProfile profile : {SamplerProfile::kContract, SamplerProfile::kReference}) {
    SamplerOptions o = make_sampler_options(profile, e.ck.generation, cfg.pad_id, cfg.bos_id);
    o.seed = 7;
    o.steps = 4;
    o.max_new_tokens = 4 * cfg.canvas;
    o.stop_ids.clear();  // every block runs: three commits ride in the next block's first step
    o.confidence_threshold = 1e-30;
    KvCache apart = cache(e), fused = cache(e);
    e.model->set_fused_commit(false);
    const GenerateResult a = generate(*e.model, apart, prompt, o);
    e.model->set_fused_commit(true);
    const GenerateResult f = generate(*e.model, fused, prompt, o);
    e.model->set_fused_commit(false);
    EXPECT_EQ(f.committed, a.committed) << sampler_profile_name(profile);
    EXPECT_EQ(f.forwards, a.forwards) << sampler_profile_name(profile);
    EXPECT_EQ(a.fused_commits, 0);
    EXPECT_EQ(f.fused_commits, static_cast<int>(f.blocks.size()) - 1) << "every block but the last rides in a step";
    EXPECT_GE(a.blocks.size(), 3U) << "too few blocks to fuse a commit";
    EXPECT_EQ(fused.len(), apart.len()) << sampler_profile_name(profile);
    EXPECT_EQ(fused.fingerprint(), apart.fingerprint()) << sampler_profile_name(profile);
  }
}

// A ModelBatchDenoiser that counts the committed blocks' rows encoded in its own passes and in its steps' forwards.
class Counting final : public BatchDenoiser {
 public:
  explicit Counting(const Model& m) : d_(m) {}
  int canvas() const override { return d_.canvas(); }
  int64_t vocab() const override { return d_.vocab(); }
  int64_t max_positions() const override { return d_.max_positions(); }
  void encode(KvCache& kv, std::span<const int32_t> ids) override { d_.encode(kv, ids); }
  void encode_batch(std::span<const EncodeSeq> seqs) override {
    ++passes;
    d_.encode_batch(seqs);
  }
  int open() override { return d_.open(); }
  void close(int seq) override { d_.close(seq); }
  void denoise(std::span<const BatchItem> items) override { d_.denoise(items); }
  bool fuses_encodes() const override { return d_.fuses_encodes(); }
  void denoise_encoding(std::span<const BatchItem> items, std::span<const EncodeSeq> enc) override {
    fused += static_cast<int>(enc.size());
    d_.denoise_encoding(items, enc);
  }

  int passes = 0, fused = 0;

 private:
  ModelBatchDenoiser d_;
};

// bench --serve's runner: with the fused commit every committed block rides in a step's forward (the prompts keep
// their passes), and each request's tokens and cache are those of the runs without it.
TEST(FusedCommitBatched, TheRunnerEncodesBlocksInItsStepsWithTheSameTokensAndCaches) {
  ModelRig e(source_path("models/dg-tiny"));
  const ModelConfig& cfg = e.ck.config;
  std::vector<std::vector<GenerateResult>> results;
  std::vector<std::vector<uint64_t>> prints;
  std::vector<int> passes, fused;
  for (const bool on : {false, true}) {
    e.model->set_fused_commit(on);
    std::vector<KvCache> caches;
    for (int i = 0; i < 3; ++i) caches.push_back(e.new_cache());
    std::vector<BatchJob> jobs;
    for (int i = 0; i < 3; ++i) {
      SamplerOptions o = make_sampler_options(SamplerProfile::kContract, e.ck.generation, cfg.pad_id, cfg.bos_id);
      o.seed = 40 + i;
      o.steps = 3 + i;  // blocks end in different rounds
      o.max_new_tokens = 3 * cfg.canvas;
      o.stop_ids.clear();
      o.confidence_threshold = 1e-30;
      o.commit_trim_tau = 0;  // whole blocks: three a request
      jobs.push_back(BatchJob{&caches[static_cast<size_t>(i)], pattern_ids(20 + 9 * i, 50 + i, cfg.vocab), o});
    }
    Counting d(*e.model);
    results.push_back(generate_batch(d, jobs));
    prints.emplace_back();
    for (const KvCache& kv : caches) prints.back().push_back(kv.fingerprint());
    passes.push_back(d.passes);
    fused.push_back(d.fused);
  }
  e.model->set_fused_commit(false);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(results[1][i].committed, results[0][i].committed) << "request " << i;
  EXPECT_EQ(prints[1], prints[0]);
  EXPECT_EQ(fused[0], 0);
  EXPECT_EQ(fused[1], 6) << "two committed blocks of each request in a step's forward";
  EXPECT_LT(passes[1], passes[0]) << "the blocks' own passes are gone";
}

INSTANTIATE_TEST_SUITE_P(Models, FusedCommit,
                         ::testing::Values(Case{"tests/fixtures/tiny_a", 512, true},
                                           Case{"tests/fixtures/tiny_a", 1, true}, Case{"models/dg-tiny", 4, false}),
                         case_name);

}  // namespace fused_commit_test
}  // namespace dg::test
