// The block loop on a scripted denoiser (no model): stop-token trim, the token budget, the contract's empty-reply
// re-roll with canvas shrink, the commit-time confidence trim, self-conditioning kinds, determinism per seed.
#include <gtest/gtest.h>

#include <functional>

#include "diffusion/generate.h"

namespace dg {
namespace generate_test {

// Emits peaked logits whose argmax follows a per-block script; optional per-row confidence.
class ScriptedDenoiser : public Denoiser {
 public:
  ScriptedDenoiser(int canvas, int64_t vocab) : canvas_(canvas), vocab_(vocab) {}
  int canvas() const override { return canvas_; }
  int64_t vocab() const override { return vocab_; }
  void encode(KvCache& kv, std::span<const int32_t> ids) override {
    encoded.push_back(std::vector<int32_t>(ids.begin(), ids.end()));
    kv.commit(static_cast<int64_t>(ids.size()));
  }
  void denoise(const KvCache&, std::span<const int32_t> canvas, ScKind kind, float, float temperature,
               RowStats* stats) override {
    kinds.push_back(kind);
    ++calls;
    const int block = static_cast<int>(encoded.size()) - 1;  // the prompt is encode #0
    logits.assign(canvas.size() * static_cast<size_t>(vocab_), 0.0f);
    for (size_t r = 0; r < canvas.size(); ++r) {
      const int32_t t = script(block, static_cast<int>(r), static_cast<int>(canvas.size()), calls);
      logits[r * static_cast<size_t>(vocab_) + static_cast<size_t>(t)] = peak(static_cast<int>(r));
    }
    tempered.resize(logits.size());
    row_stats_cpu(logits.data(), static_cast<int64_t>(canvas.size()), vocab_, temperature, tempered.data(), stats);
  }
  void draw(std::span<const double> u, int32_t* out) override {
    for (size_t r = 0; r < u.size(); ++r) out[r] = categorical_draw(tempered.data() + r * static_cast<size_t>(vocab_), vocab_, u[r]);
  }
  std::vector<float> logits, tempered;
  std::function<int32_t(int block, int row, int len, int call)> script = [](int, int row, int, int) { return 10 + row; };
  std::function<float(int row)> peak = [](int) { return 30.0f; };
  std::vector<std::vector<int32_t>> encoded;
  std::vector<ScKind> kinds;
  int calls = 0;

 private:
  int canvas_;
  int64_t vocab_;
};

ModelConfig empty_config() {
  ModelConfig c;
  c.window = 4;
  return c;  // no layers: the cache only counts tokens
}

SamplerOptions base(SamplerProfile p) {
  GenerationConfig g;
  g.eos_ids = {1, 106, 50};
  g.max_new_tokens = 64;
  g.max_denoising_steps = 10;
  SamplerOptions o = make_sampler_options(p, g, 0, 2);
  return o;
}

TEST(Generate, ConvergedBlocksStopEarlyAndChainThroughTheEncoder) {
  ScriptedDenoiser d(8, 64);
  KvCache kv(empty_config(), {});
  const SamplerOptions o = base(SamplerProfile::kReference);
  const GenerateResult r = generate(d, kv, std::vector<int32_t>{5, 6, 7}, o);
  ASSERT_EQ(r.blocks.size(), 8u) << "64 tokens / canvas 8";
  for (const BlockInfo& b : r.blocks) {
    EXPECT_EQ(b.steps, 2) << "peaked logits: stable and confident at step 2";
    EXPECT_EQ(b.stop, StopRule::kConfident);
  }
  EXPECT_EQ(r.tokens.size(), 64u);
  EXPECT_EQ(r.finish, FinishReason::kLength);
  EXPECT_EQ(d.encoded.size(), 8u) << "prompt + 7 committed blocks; the last block is not encoded";
  EXPECT_EQ(d.encoded[1], (std::vector<int32_t>{10, 11, 12, 13, 14, 15, 16, 17}));
  EXPECT_EQ(kv.len(), 3 + 7 * 8);
}

TEST(Generate, StopTokenEndsTheAnswerAndIsNotPartOfIt) {
  ScriptedDenoiser d(8, 64);
  d.script = [](int block, int row, int, int) { return block == 1 && row == 3 ? 50 : 10 + row; };
  KvCache kv(empty_config(), {});
  const GenerateResult r = generate(d, kv, std::vector<int32_t>{5}, base(SamplerProfile::kReference));
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.stop_token, 50);
  EXPECT_EQ(r.tokens.size(), 8u + 3u);
  EXPECT_EQ(r.blocks.size(), 2u);
  EXPECT_EQ(r.committed.size(), 16u) << "the whole block is committed; the answer is trimmed";
}

TEST(Generate, TokenBudgetTruncatesTheLastBlock) {
  ScriptedDenoiser d(8, 64);
  KvCache kv(empty_config(), {});
  SamplerOptions o = base(SamplerProfile::kReference);
  o.max_new_tokens = 13;
  const GenerateResult r = generate(d, kv, std::vector<int32_t>{5}, o);
  EXPECT_EQ(r.blocks.size(), 2u);
  EXPECT_EQ(r.tokens.size(), 13u);
  EXPECT_EQ(r.finish, FinishReason::kLength);
}

TEST(Generate, ContractRerollsAnEmptyFirstBlockWithAShrinkingCanvas) {
  ScriptedDenoiser d(16, 64);
  std::vector<int> lens;
  d.script = [&](int, int row, int len, int) {
    if (row == 0) lens.push_back(len);
    return row == 0 && len > 4 ? 1 : 10 + row;  // eos first until the canvas is down to a quarter
  };
  KvCache kv(empty_config(), {});
  SamplerOptions o = base(SamplerProfile::kContract);
  o.max_new_tokens = 4;
  const GenerateResult r = generate(d, kv, std::vector<int32_t>{5}, o);
  ASSERT_EQ(r.blocks.size(), 1u);
  EXPECT_EQ(r.blocks[0].rerolls, 2);
  EXPECT_EQ(r.blocks[0].canvas, 4) << "16 -> 8 -> 4";
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{10, 11, 12, 13}));
  // The reference profile keeps the empty reply.
  ScriptedDenoiser e(16, 64);
  e.script = [](int, int row, int, int) { return row == 0 ? 1 : 10 + row; };
  KvCache kv2(empty_config(), {});
  const GenerateResult s = generate(e, kv2, std::vector<int32_t>{5}, base(SamplerProfile::kReference));
  EXPECT_TRUE(s.tokens.empty());
  EXPECT_EQ(s.finish, FinishReason::kStop);
}

TEST(Generate, ContractTrimsALowConfidenceDuplicatedRow) {
  ScriptedDenoiser d(8, 64);
  d.script = [](int block, int row, int, int) { return block == 0 && row == 5 ? 14 : 10 + row; };  // row 5 copies row 4
  d.peak = [](int row) { return row == 5 ? 0.05f : 30.0f; };  // and is unsure
  KvCache kv(empty_config(), {});
  SamplerOptions o = base(SamplerProfile::kContract);
  o.commit_trim_floor = 2;
  o.max_new_tokens = 16;
  const GenerateResult r = generate(d, kv, std::vector<int32_t>{5}, o);
  ASSERT_GE(r.blocks.size(), 2u);
  EXPECT_TRUE(r.blocks[0].trimmed);
  EXPECT_EQ(r.blocks[0].kept, 5);
  EXPECT_EQ(d.encoded[1], (std::vector<int32_t>{10, 11, 12, 13, 14}));
  EXPECT_EQ(r.tokens.size(), 16u) << "trimmed blocks do not shorten the answer: the budget binds, not the block count";
}

TEST(ConfidenceTrim, ScansOnlyTheAnswerRegionAboveTheFloor) {
  SamplerOptions o = base(SamplerProfile::kContract);
  o.commit_trim_floor = 2;
  const std::vector<int32_t> am{3, 4, 4, 4, 1, 7, 7};
  std::vector<float> pm{1, 1, 1, 0.5f, 1, 0.1f, 0.1f};
  EXPECT_EQ(confidence_trim(am, pm, o), 3) << "row 3 duplicates row 2 and is below tau";
  pm[3] = 0.95f;
  EXPECT_EQ(confidence_trim(am, pm, o), 7) << "rows after the stop token (index 4) are never trimmed";
  pm[2] = 0.5f;
  o.commit_trim_floor = 3;
  EXPECT_EQ(confidence_trim(am, pm, o), 7) << "row 2 is below the floor";
  o.commit_trim_tau = 0;
  pm[3] = 0.1f;
  EXPECT_EQ(confidence_trim(am, pm, o), 7) << "tau 0 disables the trim";
}

TEST(Generate, SelfConditioningKindsPerProfile) {
  for (SamplerProfile p : {SamplerProfile::kReference, SamplerProfile::kContract}) {
    ScriptedDenoiser d(4, 32);
    KvCache kv(empty_config(), {});
    SamplerOptions o = base(p);
    o.max_new_tokens = 4;
    generate(d, kv, std::vector<int32_t>{5}, o);
    ASSERT_GE(d.kinds.size(), 2u);
    EXPECT_EQ(d.kinds[0], p == SamplerProfile::kReference ? ScKind::kZero : ScKind::kSelfEmbed);
    EXPECT_EQ(d.kinds[1], ScKind::kLogits);
  }
}

TEST(Generate, SameSeedSameTokensDifferentSeedDifferentCanvas) {
  auto run = [](uint64_t seed) {
    ScriptedDenoiser d(8, 500);
    d.peak = [](int row) { return row % 2 ? 0.3f : 4.0f; };  // some rows stay uncertain: the draws matter
    d.script = [](int, int row, int, int call) { return (row * 7 + call) % 500; };
    KvCache kv(empty_config(), {});
    SamplerOptions o = base(SamplerProfile::kReference);
    o.seed = seed;
    o.max_new_tokens = 16;
    std::vector<int32_t> canvases;
    GenerateEvents ev;
    ev.on_step = [&](const StepInfo&, const StepView& v) {
      canvases.insert(canvases.end(), v.canvas_out.begin(), v.canvas_out.end());
    };
    generate(d, kv, std::vector<int32_t>{5}, o, &ev);
    return canvases;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

}  // namespace generate_test
}  // namespace dg
