// Top-k attention in the forward (Model::set_attention_topk) on the embedded model: a rule that keeps every visible
// key gives the dense model's cache and logits bit for bit; a rule that drops keys changes the full-attention
// layers and leaves the sliding ones as they are; a chunked prefill gives the one-pass result, and a generation
// repeats token for token.
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "diffusion/generate.h"
#include "model/model_harness.h"
#include "support/paths.h"
#include "support/seeded.h"

namespace dg::test {
namespace attention_topk_model_test {

constexpr AttnTopk kDyn{AttnTopk::Mode::kDyn, 0};
constexpr AttnTopk fixed(int64_t k) { return {AttnTopk::Mode::kFixed, k}; }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The canvas logits after encoding `prompt` with the model's current rule, and the cache fingerprint.
std::pair<std::vector<float>, uint64_t> logits_after(ModelRig& e, const std::vector<int32_t>& prompt,
                                                     const std::vector<int32_t>& canvas) {
  KvCache kv = e.new_cache(256);
  e.model->encode(kv, prompt);
  Tensor logits = e.be->alloc(Shape{static_cast<int64_t>(canvas.size()), e.ck.config.vocab});
  e.model->denoise(kv, canvas, ScInput{ScKind::kZero}, logits);
  return {to_host(*e.be, logits), kv.fingerprint()};
}

TEST(AttentionTopkModel, KeepingEveryVisibleKeyIsTheDenseModel) {
  ModelRig e(source_path("models/dg-tiny"));
  const int64_t vocab = e.ck.config.vocab, canvas_len = e.ck.config.canvas;
  // 30 prompt tokens and the 32-token canvas: at most 62 visible keys, which dyn (64 at least) keeps whole.
  const auto prompt = pattern_ids(30, 1, vocab), canvas = pattern_ids(static_cast<int>(canvas_len), 2, vocab);
  const auto dense = logits_after(e, prompt, canvas);
  for (const AttnTopk& t : {fixed(kAttnTopkMax), kDyn, fixed(62)}) {
    e.model->set_attention_topk(t);
    const auto sparse = logits_after(e, prompt, canvas);
    EXPECT_TRUE(same_bits(sparse.first, dense.first)) << attn_topk_name(t);
    EXPECT_EQ(sparse.second, dense.second) << attn_topk_name(t);
  }
  e.model->set_attention_topk(fixed(4));
  EXPECT_FALSE(same_bits(logits_after(e, prompt, canvas).first, dense.first)) << "k 4 drops keys: logits change";
  EXPECT_THROW(e.model->set_attention_topk(fixed(0)), Error);
  EXPECT_THROW(e.model->set_attention_topk(fixed(kAttnTopkMax + 1)), Error);
}

TEST(AttentionTopkModel, OnlyTheFullAttentionLayersChange) {
  ModelRig e(source_path("models/dg-tiny"));
  const ModelConfig& cfg = e.ck.config;
  KvCache kv = e.new_cache(256);
  e.model->encode(kv, pattern_ids(120, 3, cfg.vocab));
  const std::vector<float> x = seeded_uniform(static_cast<size_t>(cfg.canvas * cfg.hidden), 9, -1.0f, 1.0f);
  Tensor h = e.be->alloc(Shape{cfg.canvas, cfg.hidden});
  e.be->copy_from_host(x.data(), h);
  int full = 0, sliding = 0;
  for (int l = 0; l < cfg.n_layers; ++l) {
    e.model->set_attention_topk({});
    const std::vector<float> dense = to_host(*e.be, e.model->decoder_layer(l, h, kv));
    e.model->set_attention_topk(fixed(2));
    const std::vector<float> sparse = to_host(*e.be, e.model->decoder_layer(l, h, kv));
    const bool is_sliding = cfg.layers[static_cast<size_t>(l)].sliding;
    EXPECT_EQ(same_bits(sparse, dense), is_sliding) << "layer " << l << (is_sliding ? " (sliding)" : " (full)");
    (is_sliding ? sliding : full) += 1;
  }
  EXPECT_GT(full, 0);
  EXPECT_GT(sliding, 0);
}

TEST(AttentionTopkModel, ChunkedPrefillMatchesOnePassAndGenerationsRepeat) {
  ModelRig e(source_path("models/dg-tiny"));
  e.model->set_attention_topk(fixed(8));
  const auto prompt = pattern_ids(90, 4, e.ck.config.vocab);
  KvCache one = e.new_cache(256), parts = e.new_cache(256);
  e.model->encode(one, prompt);
  e.model->set_prefill_chunk(7);
  e.model->encode(parts, prompt);
  e.model->set_prefill_chunk(4096);
  EXPECT_EQ(one.fingerprint(), parts.fingerprint());

  SamplerOptions o = make_sampler_options(SamplerProfile::kContract, e.ck.generation, 0, 2);
  o.max_new_tokens = 32;
  o.steps = 3;
  const GenerateResult a = generate(*e.model, one, {}, o);
  const GenerateResult b = generate(*e.model, parts, {}, o);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_FALSE(a.tokens.empty());
}

}  // namespace attention_topk_model_test
}  // namespace dg::test
