// Prefill in chunks equals prefill at once (sliding windows across chunk edges), and generate -> rewind -> generate
// restores the KV cache byte for byte and regenerates the same tokens.
#include <gtest/gtest.h>

#include "core/error.h"
#include "diffusion/generate.h"
#include "model/model_harness.h"
#include "support/compare.h"

namespace dg::test {
namespace chunked_prefill_test {

// Both caches hold the same positions and give the same canvas logits.
void expect_same_logits(ModelRig& e, const KvCache& one, const KvCache& parts, const std::vector<int32_t>& canvas) {
  ASSERT_EQ(one.len(), parts.len());
  const int64_t C = static_cast<int64_t>(canvas.size());
  Tensor a = e.be->alloc(Shape{C, e.ck.config.vocab}), b = e.be->alloc(Shape{C, e.ck.config.vocab});
  e.model->denoise(one, canvas, ScInput{ScKind::kZero}, a);
  e.model->denoise(parts, canvas, ScInput{ScKind::kZero}, b);
  const Diff d = compare({a.f32(), static_cast<size_t>(a.numel())}, {b.f32(), static_cast<size_t>(b.numel())});
  EXPECT_LE(d.max_abs, 1e-4) << d.str();
}

TEST(ChunkedPrefill, ChunksGiveTheSameCacheAndLogitsAsOnePass) {
  DG_REQUIRE_FIXTURE("tiny_a");
  const RefFixture fx = RefFixture::load("tiny_a");
  ModelRig e(fx.ckpt_dir);
  const auto prompt = read_i32(fx.dumps_f32, "prompt"), canvas = read_i32(fx.dumps_f32, "canvas");
  ASSERT_GT(prompt.size(), static_cast<size_t>(e.ck.config.window)) << "the prompt must cross the sliding window";
  KvCache one = e.new_cache(), parts = e.new_cache();
  e.model->encode(one, prompt);
  const std::span<const int32_t> p(prompt);
  e.model->encode(parts, p.subspan(0, 3));
  e.model->encode(parts, p.subspan(3, 9));
  e.model->encode(parts, p.subspan(12));
  expect_same_logits(e, one, parts, canvas);
}

TEST(ChunkedPrefill, TheModelsPrefillChunkSplitsLongPromptsWithTheSameResult) {
  DG_REQUIRE_FIXTURE("tiny_a");
  const RefFixture fx = RefFixture::load("tiny_a");
  ModelRig e(fx.ckpt_dir);
  const auto prompt = read_i32(fx.dumps_f32, "prompt"), canvas = read_i32(fx.dumps_f32, "canvas");
  KvCache one = e.new_cache(), parts = e.new_cache();
  e.model->encode(one, prompt);
  EXPECT_THROW(e.model->set_prefill_chunk(0), Error);
  e.model->set_prefill_chunk(5);  // crosses the 8-token window and leaves a short last chunk
  e.model->encode(parts, prompt);
  e.model->set_prefill_chunk(4096);
  expect_same_logits(e, one, parts, canvas);
}

TEST(Rewind, GenerateRewindGenerateIsByteIdentical) {
  DG_REQUIRE_FIXTURE("tiny_a");
  const RefFixture fx = RefFixture::load("tiny_a");
  ModelRig e(fx.ckpt_dir);
  const auto prompt = read_i32(fx.dumps_f32, "prompt");
  KvCache kv = e.new_cache();
  e.model->encode(kv, prompt);
  const uint64_t fp = kv.fingerprint();
  SamplerOptions o = make_sampler_options(SamplerProfile::kContract, e.ck.generation, 0, 2);
  o.max_new_tokens = 48;
  o.steps = 6;
  const GenerateResult first = generate(*e.model, kv, {}, o);
  ASSERT_GT(kv.len(), static_cast<int64_t>(prompt.size())) << "generation must have encoded committed blocks";
  ASSERT_TRUE(kv.can_rewind(static_cast<int64_t>(prompt.size())));
  kv.rewind(static_cast<int64_t>(prompt.size()));
  EXPECT_EQ(kv.fingerprint(), fp);
  const GenerateResult second = generate(*e.model, kv, {}, o);
  EXPECT_EQ(first.tokens, second.tokens);
  EXPECT_EQ(first.committed, second.committed);
}

}  // namespace chunked_prefill_test
}  // namespace dg::test
