// The sampler's decisions on synthetic inputs: temperature arithmetic, the entropy-bound accept rule, row
// statistics, categorical draws, and every stop rule of both profiles.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "diffusion/rng.h"
#include "core/error.h"
#include "diffusion/sampler.h"

namespace dg {
namespace sampler_test {

TEST(Schedule, CountsDownFromTMaxAndNeverReachesTMin) {
  EXPECT_FLOAT_EQ(schedule_temperature(48, 48, 0.4, 0.8), 0.8f);
  const float last = schedule_temperature(1, 48, 0.4, 0.8);
  EXPECT_NEAR(last, 0.408333, 1e-6);
  EXPECT_GT(last, 0.4f);
  for (int cur = 48; cur > 1; --cur)
    EXPECT_GT(schedule_temperature(cur, 48, 0.4, 0.8), schedule_temperature(cur - 1, 48, 0.4, 0.8));
}

TEST(Schedule, UsesF32TensorArithmetic) {
  // f32(f32(f32(0.4) * f32(46/48)) + f32(0.4)), not the double expression rounded once (they differ by 1 ulp).
  const float frac = 46.0f / 48.0f;
  const float want = static_cast<float>(0.8 - 0.4) * frac + 0.4f;
  EXPECT_EQ(schedule_temperature(46, 48, 0.4, 0.8), want);
}

TEST(EntropyBoundAccept, ExclusivePrefixSumAcceptsOneMoreThanInclusive) {
  // Sorted: 0.02, 0.05, 0.04 -> order 0.02, 0.04, 0.05. Exclusive sums: 0, 0.02, 0.06 -> all <= 0.1 accepted.
  const std::vector<float> h{0.02f, 0.05f, 0.04f, 0.3f};
  // 0.3: exclusive sum 0.11 > 0.1 -> rejected.
  const auto a = entropy_bound_accept(h, 0.1);
  EXPECT_EQ(a, (std::vector<uint8_t>{1, 1, 1, 0}));
  // An inclusive rule would stop at 0.02+0.04+0.05 = 0.11 > 0.1 and reject the 0.05 position; we accept it.
}

TEST(EntropyBoundAccept, LowestEntropyIsAlwaysAccepted) {
  const std::vector<float> h{5.0f, 3.0f, 4.0f};
  EXPECT_EQ(entropy_bound_accept(h, 0.1), (std::vector<uint8_t>{0, 1, 0}));
}

TEST(EntropyBoundAccept, RankKCrossingTheBoundIsStillAccepted) {
  const std::vector<float> h{0.09f, 0.5f, 0.0f};
  // Sorted 0.0, 0.09, 0.5: exclusive sums 0, 0.0, 0.09 -> all accepted although the total is 0.59.
  EXPECT_EQ(entropy_bound_accept(h, 0.1), (std::vector<uint8_t>{1, 1, 1}));
}

TEST(RowStats, EntropyArgmaxAndProbabilityOfAKnownRow) {
  const std::vector<float> raw{1.0f, 3.0f, 3.0f, -2.0f};
  RowStats st;
  std::vector<float> tempered(4);
  row_stats_cpu(raw.data(), 1, 4, 0.5f, tempered.data(), &st);
  EXPECT_EQ(st.argmax, 1) << "ties go to the lowest index, as torch.argmax";
  EXPECT_EQ(tempered[1], 6.0f);
  double z = 0;
  for (float x : tempered) z += std::exp(static_cast<double>(x));
  double h = 0;
  for (float x : tempered) {
    const double p = std::exp(static_cast<double>(x)) / z;
    h -= p * std::log(p);
  }
  EXPECT_NEAR(st.entropy, h, 1e-6);
  EXPECT_NEAR(st.p_max, std::exp(6.0) / z, 1e-6);
}

TEST(RowStats, MaskedEntriesWeighNothing) {
  // -inf logits (masked tokens) leave the statistics of the other entries, as the GPU's passes compute them.
  const std::vector<float> masked{1.0f, -INFINITY, 3.0f, -INFINITY, -2.0f}, kept{1.0f, 3.0f, -2.0f};
  RowStats a, b;
  std::vector<float> ta(masked.size()), tb(kept.size());
  row_stats_cpu(masked.data(), 1, static_cast<int64_t>(masked.size()), 0.7f, ta.data(), &a);
  row_stats_cpu(kept.data(), 1, static_cast<int64_t>(kept.size()), 0.7f, tb.data(), &b);
  EXPECT_TRUE(std::isfinite(a.entropy));
  EXPECT_EQ(a.argmax, 2);
  EXPECT_FLOAT_EQ(a.entropy, b.entropy);
  EXPECT_FLOAT_EQ(a.p_max, b.p_max);
}

TEST(RowStats, InvariantsOnRandomRows) {
  Lcg rng(3);
  const int64_t V = 4096, rows = 16;
  std::vector<float> raw(static_cast<size_t>(V * rows));
  for (float& x : raw) x = static_cast<float>(rng.uniform() * 60.0 - 30.0);
  std::vector<RowStats> st(static_cast<size_t>(rows));
  std::vector<float> tempered(raw.size());
  row_stats_cpu(raw.data(), rows, V, 0.8f, tempered.data(), st.data());
  for (int64_t r = 0; r < rows; ++r) {
    const auto& s = st[static_cast<size_t>(r)];
    EXPECT_TRUE(std::isfinite(s.entropy));
    EXPECT_GE(s.entropy, 0.0f);
    EXPECT_LE(s.entropy, std::log(static_cast<double>(V)) + 1e-5);
    double sum = 0;
    const float mx = tempered[static_cast<size_t>(r * V + s.argmax)];
    for (int64_t v = 0; v < V; ++v) {
      EXPECT_LE(tempered[static_cast<size_t>(r * V + v)], mx);
      sum += std::exp(static_cast<double>(tempered[static_cast<size_t>(r * V + v)] - mx));
    }
    EXPECT_NEAR(1.0 / sum, s.p_max, 1e-6) << "softmax normaliser";
  }
}

TEST(CategoricalDraw, InverseCdfPicksTheIntervalHoldingU) {
  // probabilities 0.25, 0.5, 0.25 (log-space)
  const std::vector<float> t{std::log(0.25f), std::log(0.5f), std::log(0.25f)};
  EXPECT_EQ(categorical_draw(t.data(), 3, 0.0), 0);
  EXPECT_EQ(categorical_draw(t.data(), 3, 0.2499), 0);
  EXPECT_EQ(categorical_draw(t.data(), 3, 0.2501), 1);
  EXPECT_EQ(categorical_draw(t.data(), 3, 0.7501), 2);
  EXPECT_EQ(categorical_draw(t.data(), 3, 0.99999999), 2);
}

TEST(CategoricalDraw, FrequenciesFollowTheDistribution) {
  const std::vector<float> t{0.0f, std::log(3.0f)};  // p = 0.25, 0.75
  Lcg rng(11);
  int ones = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ones += categorical_draw(t.data(), 2, rng.uniform());
  EXPECT_NEAR(static_cast<double>(ones) / n, 0.75, 0.015);
}

TEST(Lcg, SeededStreamIsReproducibleAndInRange) {
  Lcg a(42), b(42), c(43);
  EXPECT_EQ(a.state(), 43u);
  for (int i = 0; i < 1000; ++i) {
    const int32_t x = a.randint(262144);
    EXPECT_EQ(x, b.randint(262144));
    EXPECT_GE(x, 0);
    EXPECT_LT(x, 262144);
  }
  Lcg d(42);
  EXPECT_NE(c.next_u32(), d.next_u32());
  Lcg e(0);
  EXPECT_EQ(e.next_u32(), static_cast<uint32_t>((1ull * 6966169279ull + 1039523323ull) >> 32));
}

using Ids = std::vector<int32_t>;
using Mask = std::vector<uint8_t>;

SamplerOptions opts(SamplerProfile p) {
  GenerationConfig g;
  g.eos_ids = {1, 106, 50};
  return make_sampler_options(p, g, 0, 2);
}

TEST(StopRules, ReferenceNeedsStableAndConfidentAndNeverStopsAtStepOne) {
  const SamplerOptions o = opts(SamplerProfile::kReference);
  StopState s(o, 3);
  const std::vector<int32_t> am{5, 6, 7};
  const std::vector<uint8_t> acc{1, 1, 1};
  EXPECT_EQ(s.update(am, acc, 0.0, 1), StopRule::kNone) << "history starts at -1: step 1 is never stable";
  EXPECT_EQ(s.update(am, acc, 0.004, 2), StopRule::kConfident);
  StopState t(o, 3);
  t.update(am, acc, 0.0, 1);
  EXPECT_EQ(t.update(am, acc, 0.006, 2), StopRule::kNone) << "stable but not confident";
  EXPECT_EQ(t.update(Ids{5, 6, 8}, acc, 0.0, 3), StopRule::kNone) << "confident but not stable";
}

TEST(StopRules, StabilityThresholdZeroMeansAlwaysStable) {
  SamplerOptions o = opts(SamplerProfile::kReference);
  o.stability_threshold = 0;
  StopState s(o, 2);
  EXPECT_EQ(s.update(Ids{1, 2}, Mask{1, 1}, 0.001, 1), StopRule::kConfident);
}

TEST(StopRules, StabilityThresholdTwoNeedsTwoRepeats) {
  SamplerOptions o = opts(SamplerProfile::kReference);
  o.stability_threshold = 2;
  StopState s(o, 2);
  EXPECT_EQ(s.update(Ids{1, 2}, Mask{1, 1}, 0.0, 1), StopRule::kNone);
  EXPECT_EQ(s.update(Ids{1, 2}, Mask{1, 1}, 0.0, 2), StopRule::kNone);
  EXPECT_EQ(s.update(Ids{1, 2}, Mask{1, 1}, 0.0, 3), StopRule::kConfident);
}

TEST(StopRules, ContractEntropyOnlyStopWaitsForTheFloor) {
  const SamplerOptions o = opts(SamplerProfile::kContract);
  StopState s(o, 2);
  // Alternating accept masks keep the plateau rule out of the way.
  for (int step = 1; step < 12; ++step)
    EXPECT_EQ(s.update(Ids{step, step + 1}, step % 2 ? Mask{1, 0} : Mask{0, 1}, 0.04, step), StopRule::kNone) << step;
  EXPECT_EQ(s.update(Ids{20, 21}, Mask{1, 1}, 0.04, 12), StopRule::kEntropy);
  const SamplerOptions r = opts(SamplerProfile::kReference);
  StopState t(r, 2);
  for (int step = 1; step <= 20; ++step) EXPECT_EQ(t.update(Ids{step, step}, Mask{1, 0}, 0.04, step), StopRule::kNone);
}

TEST(StopRules, ContractPlateauStopsAStuckAcceptMask) {
  SamplerOptions o = opts(SamplerProfile::kContract);
  o.entropy_stop = 0;
  StopState s(o, 2);
  for (int step = 1; step < 8; ++step)
    EXPECT_EQ(s.update(Ids{step, step}, Mask{1, 0}, 0.049, step), StopRule::kNone) << step;
  EXPECT_EQ(s.update(Ids{9, 9}, Mask{1, 0}, 0.049, 8), StopRule::kPlateau);
  StopState t(o, 2);
  for (int step = 1; step < 8; ++step) t.update(Ids{step, step}, Mask{1, 0}, 0.051, step);
  EXPECT_EQ(t.update(Ids{9, 9}, Mask{1, 0}, 0.051, 8), StopRule::kNone) << "plateau needs mean entropy < 0.05";
}

TEST(StopRules, ContractPadGateNeverStopsAnAllPadCanvas) {
  const SamplerOptions o = opts(SamplerProfile::kContract);
  StopState s(o, 2);
  s.update(Ids{0, 0}, Mask{1, 1}, 0.0, 1);
  EXPECT_EQ(s.update(Ids{0, 0}, Mask{1, 1}, 0.0, 2), StopRule::kNone);
  SamplerOptions off = o;
  off.pad_gate = false;
  StopState t(off, 2);
  t.update(Ids{0, 0}, Mask{1, 1}, 0.0, 1);
  EXPECT_EQ(t.update(Ids{0, 0}, Mask{1, 1}, 0.0, 2), StopRule::kConfident);
}

TEST(SamplerOptions, ReferenceProfileTurnsEveryDivergenceOff) {
  const SamplerOptions r = opts(SamplerProfile::kReference);
  EXPECT_FALSE(r.argmax_commit);
  EXPECT_FALSE(r.first_step_self_embed);
  EXPECT_EQ(r.plateau_steps, 0);
  EXPECT_FALSE(r.pad_gate);
  EXPECT_EQ(r.entropy_stop, 0.0);
  EXPECT_EQ(r.empty_reply_retries, 0);
  EXPECT_EQ(r.commit_trim_tau, 0.0);
  EXPECT_EQ(r.sc_sparse_cutoff, 0.0);
  const SamplerOptions c = opts(SamplerProfile::kContract);
  EXPECT_TRUE(c.argmax_commit);
  EXPECT_TRUE(c.first_step_self_embed);
  EXPECT_EQ(c.plateau_steps, 8);
  EXPECT_EQ(c.entropy_stop, 0.05);
  EXPECT_EQ(c.entropy_stop_min_steps, 12);
  EXPECT_EQ(c.empty_reply_retries, 3);
  EXPECT_EQ(c.commit_trim_tau, 0.9);
  EXPECT_NEAR(c.sc_sparse_cutoff, std::exp(-10.0), 1e-12);
  EXPECT_EQ(c.stop_ids, (std::vector<int32_t>{1, 106, 50}));
}

TEST(SamplerOptions, ValidationNamesTheBadOption) {
  SamplerOptions o = opts(SamplerProfile::kContract);
  o.t_max = 0.3;
  try {
    o.validate();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("t_max"), std::string::npos) << e.what();
  }
}

}  // namespace sampler_test
}  // namespace dg
