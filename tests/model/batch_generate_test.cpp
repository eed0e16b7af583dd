// Batched denoising against one sequence at a time on the CPU reference: the batched forward gives every
// sequence the logits of its own forward, bit for bit (the CPU kernels compute each row on its own), a batched
// encode writes every cache as encoding each alone would, and requests
// generated in lock-step (joining and leaving between steps, prompts prefilled in chunks) give exactly the tokens,
// blocks and forwards of generate() run on each alone.
#include <gtest/gtest.h>

#include "core/error.h"
#include "diffusion/batch.h"
#include "model/model_harness.h"
#include "support/paths.h"

namespace dg::test {
namespace batch_generate_test {

// Context lengths below, at and past the sliding window (tiny_a: window 8, canvas 16), one self-conditioning kind
// each, and a batch of one.
TEST(BatchedDenoise, EverySequenceGetsTheLogitsOfItsOwnForward) {
  DG_REQUIRE_FIXTURE("tiny_a");
  const RefFixture fx = RefFixture::load("tiny_a");
  ModelRig e(fx.ckpt_dir);
  const ModelConfig& cfg = e.ck.config;
  const int64_t V = cfg.vocab;
  const std::vector<int> ctx = {3, static_cast<int>(cfg.window), 29, 1};
  std::vector<KvCache> caches;
  for (size_t i = 0; i < ctx.size(); ++i) {
    caches.push_back(e.new_cache());
    e.model->encode(caches.back(), pattern_ids(ctx[i], static_cast<int>(i), V));
  }
  // The logits self-conditioning input: a tempered step of sequence 2 on its own.
  const std::vector<int32_t> c2 = pattern_ids(cfg.canvas, 7, V);
  Tensor l0 = e.be->alloc_f32(Shape{cfg.canvas, V}), tempered = e.be->alloc(Shape{cfg.canvas, V});
  e.model->denoise(caches[2], c2, ScInput{ScKind::kZero}, l0);
  std::vector<RowStats> st(static_cast<size_t>(cfg.canvas));
  e.be->row_stats(l0, 0.7f, tempered, st.data());

  std::vector<std::vector<int32_t>> canvases = {pattern_ids(cfg.canvas, 4, V), pattern_ids(cfg.canvas / 2, 5, V), c2,
                                                pattern_ids(cfg.canvas, 6, V)};
  const std::vector<ScInput> sc = {ScInput{ScKind::kZero}, ScInput{ScKind::kSelfEmbed},
                                   ScInput{ScKind::kLogits, &tempered, 0.0f},
                                   ScInput{ScKind::kLogits, nullptr, 0.0f}};
  std::vector<DenoiseSeq> seqs;
  for (size_t i = 0; i < 3; ++i) seqs.push_back(DenoiseSeq{&caches[i], canvases[i], sc[i]});
  for (const size_t n : {size_t{3}, size_t{1}}) {
    const Tensor y = e.model->denoise_batch(std::span<const DenoiseSeq>(seqs).first(n));
    int64_t row0 = 0;
    for (size_t i = 0; i < n; ++i) {
      const int64_t rows = static_cast<int64_t>(canvases[i].size());
      Tensor got = e.be->alloc_f32(Shape{rows, V}), want = e.be->alloc_f32(Shape{rows, V});
      e.model->lm_head_rows(row_slice(y, row0, rows), got);
      e.model->denoise(caches[i], canvases[i], sc[i], want);
      EXPECT_EQ(to_host(*e.be, got), to_host(*e.be, want)) << "sequence " << i << " of a batch of " << n;
      row0 += rows;
    }
    EXPECT_EQ(row0, y.shape[0]);
  }
  seqs.push_back(DenoiseSeq{&caches[3], canvases[3], sc[3]});
  EXPECT_THROW(e.model->denoise_batch(seqs), Error) << "logits self-conditioning without logits";
  EXPECT_THROW(e.model->denoise_batch({}), Error);
}

// Context 0, inside and past the window (tiny_a: 8), chunks shorter and longer than the window, an empty one.
TEST(BatchedEncode, EveryCacheHoldsWhatEncodingItAloneWrites) {
  DG_REQUIRE_FIXTURE("tiny_a");
  const RefFixture fx = RefFixture::load("tiny_a");
  ModelRig e(fx.ckpt_dir);
  const int64_t V = e.ck.config.vocab;
  const std::vector<int> before = {0, 5, 20, 3}, add = {12, 3, 9, 0};
  std::vector<KvCache> one, together;
  std::vector<std::vector<int32_t>> chunk;
  for (size_t i = 0; i < before.size(); ++i) {
    one.push_back(e.new_cache());
    together.push_back(e.new_cache());
    const std::vector<int32_t> head = pattern_ids(before[i], static_cast<int>(i), V);
    e.model->encode(one.back(), head);
    e.model->encode(together.back(), head);
    chunk.push_back(pattern_ids(add[i], static_cast<int>(i) + 10, V));
  }
  std::vector<EncodeSeq> seqs;
  for (size_t i = 0; i < before.size(); ++i) {
    e.model->encode(one[i], chunk[i]);
    seqs.push_back(EncodeSeq{&together[i], chunk[i]});
  }
  e.model->encode_batch(seqs);
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(together[i].len(), one[i].len()) << "sequence " << i;
    EXPECT_EQ(together[i].fingerprint(), one[i].fingerprint()) << "sequence " << i;
  }
}

struct Case {
  int prompt_len, seed, steps, max_new;
  bool argmax;
};

SamplerOptions options(const ModelRig& e, const Case& c) {
  SamplerOptions o = make_sampler_options(SamplerProfile::kContract, e.ck.generation, e.ck.config.pad_id, 2);
  o.seed = static_cast<uint64_t>(c.seed);
  o.steps = c.steps;
  o.max_new_tokens = c.max_new;
  o.argmax_commit = c.argmax;
  return o;
}

void expect_same(const GenerateResult& got, const GenerateResult& want, size_t i) {
  EXPECT_EQ(got.tokens, want.tokens) << "request " << i;
  EXPECT_EQ(got.committed, want.committed) << "request " << i;
  EXPECT_EQ(got.finish, want.finish) << "request " << i;
  EXPECT_EQ(got.forwards, want.forwards) << "request " << i;
  ASSERT_EQ(got.blocks.size(), want.blocks.size()) << "request " << i;
  for (size_t b = 0; b < got.blocks.size(); ++b) {
    EXPECT_EQ(got.blocks[b].steps, want.blocks[b].steps) << "request " << i << " block " << b;
    EXPECT_EQ(got.blocks[b].kept, want.blocks[b].kept) << "request " << i << " block " << b;
    EXPECT_EQ(got.blocks[b].rerolls, want.blocks[b].rerolls) << "request " << i << " block " << b;
  }
}

// Requests of different prompt lengths, seeds, step budgets, answer lengths and commit rules; max_batch below the
// request count (later ones join as earlier ones leave) and a prefill budget that splits prompts across rounds.
void lock_step_equals_alone(const std::string& dir, const std::vector<Case>& cases, BatchOptions bo) {
  ModelRig e(dir);
  std::vector<GenerateResult> alone;
  std::vector<uint64_t> alone_kv;
  for (const Case& c : cases) {
    KvCache kv = e.new_cache();
    alone.push_back(generate(*e.model, kv, pattern_ids(c.prompt_len, c.seed, e.ck.config.vocab), options(e, c)));
    alone_kv.push_back(kv.fingerprint());
  }
  std::vector<KvCache> caches;
  for (size_t i = 0; i < cases.size(); ++i) caches.push_back(e.new_cache());
  std::vector<BatchJob> jobs;
  for (size_t i = 0; i < cases.size(); ++i)
    jobs.push_back(BatchJob{&caches[i], pattern_ids(cases[i].prompt_len, cases[i].seed, e.ck.config.vocab),
                            options(e, cases[i]), nullptr});
  ModelBatchDenoiser d(*e.model, /*logit_rows=*/40);  // lm_head chunks of whole sequences, several per step
  const std::vector<GenerateResult> together = generate_batch(d, jobs, bo);
  ASSERT_EQ(together.size(), alone.size());
  int blocks = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    expect_same(together[i], alone[i], i);
    EXPECT_EQ(caches[i].fingerprint(), alone_kv[i]) << "request " << i << ": batched block encodes";
    blocks += static_cast<int>(alone[i].blocks.size());
  }
  EXPECT_GT(blocks, static_cast<int>(cases.size())) << "some request must run several blocks";
}

TEST(BatchedGenerate, LockStepGivesTheTokensOfEachRequestAlone) {
  DG_REQUIRE_FIXTURE("tiny_a");
  const RefFixture fx = RefFixture::load("tiny_a");
  lock_step_equals_alone(fx.ckpt_dir,
                         {{5, 1, 6, 40, true}, {23, 2, 4, 16, true}, {12, 3, 8, 33, false}, {1, 4, 5, 64, true},
                          {30, 5, 3, 20, false}},
                         BatchOptions{3, 7});
}

TEST(BatchedGenerate, EmbeddedModelLockStepGivesTheTokensOfEachRequestAlone) {
  lock_step_equals_alone(source_path("models/dg-tiny"),
                         {{40, 1, 4, 64, true}, {70, 2, 3, 64, true}, {9, 3, 4, 64, false}}, BatchOptions{8, 4096});
}

// A request cancelled mid-block leaves the batch at its next step; the others are unaffected.
TEST(BatchedGenerate, CancelledRequestLeavesAtItsNextStep) {
  DG_REQUIRE_FIXTURE("tiny_a");
  const RefFixture fx = RefFixture::load("tiny_a");
  ModelRig e(fx.ckpt_dir);
  const Case a{6, 1, 6, 48, true}, b{9, 2, 6, 48, true};
  int asked = 0;
  GenerateEvents cancel_after_7;
  cancel_after_7.cancel = [&] { return ++asked > 7; };
  KvCache k1 = e.new_cache(), k2 = e.new_cache();
  const int64_t V = e.ck.config.vocab;
  std::vector<BatchJob> jobs = {{&k1, pattern_ids(a.prompt_len, a.seed, V), options(e, a), &cancel_after_7},
                                {&k2, pattern_ids(b.prompt_len, b.seed, V), options(e, b), nullptr}};
  ModelBatchDenoiser d(*e.model);
  const std::vector<GenerateResult> got = generate_batch(d, jobs);
  EXPECT_EQ(got[0].finish, FinishReason::kCancelled);
  EXPECT_EQ(got[0].forwards, 7);
  KvCache alone = e.new_cache();
  asked = 0;
  expect_same(got[0], generate(*e.model, alone, jobs[0].prompt, jobs[0].opt, &cancel_after_7), 0);
  KvCache alone2 = e.new_cache();
  expect_same(got[1], generate(*e.model, alone2, jobs[1].prompt, jobs[1].opt), 1);
}

}  // namespace batch_generate_test
}  // namespace dg::test
