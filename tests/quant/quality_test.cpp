// Quantization quality on the tiny models, per profile: per-layer cosine of the encoder and decoder hidden states
// and the logit KL divergence of two denoise steps, pack vs source model, on the CPU in f32. And the check that
// the error is the format's, not a bug's: the pack's engine and its dequantised twin (an f32 checkpoint of the
// decoded weights) give bit-identical logits. Numbers: docs/NUMERICS.md ("Quantized packs").
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <tuple>

#include <fmt/format.h>

#include "model/model_harness.h"
#include "quant/quant_test_util.h"
#include "support/compare.h"
#include "support/paths.h"

namespace dg::test {
namespace quality_test {

struct Steps {
  Capture enc, dec;
  std::vector<float> logits1, logits2;
};

// Prefill of a fixed prompt, then denoise step 1 (self-conditioning on the canvas embedding, which runs the SC
// MLP) and step 2 (self-conditioning from step 1's logits).
Steps run_steps(ModelRig& e) {
  const ModelConfig& c = e.ck.config;
  std::vector<int32_t> prompt(24), canvas(static_cast<size_t>(c.canvas));
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 37 + 11) % static_cast<size_t>(c.vocab));
  for (size_t i = 0; i < canvas.size(); ++i) canvas[i] = static_cast<int32_t>((i * 53 + 7) % static_cast<size_t>(c.vocab));
  Steps s;
  KvCache kv = e.new_cache();
  const ForwardTrace enc = s.enc.fn(), dec = s.dec.fn();
  e.model->encode(kv, prompt, &enc);
  Tensor logits = e.be->alloc(Shape{c.canvas, c.vocab});
  e.model->denoise(kv, canvas, ScInput{ScKind::kSelfEmbed}, logits, &dec);
  s.logits1.assign(logits.f32(), logits.f32() + logits.numel());
  Tensor sc = e.be->alloc(Shape{c.canvas, c.vocab});
  std::copy(s.logits1.begin(), s.logits1.end(), sc.f32());
  e.model->denoise(kv, canvas, ScInput{ScKind::kLogits, &sc, 0.0f}, logits);
  s.logits2.assign(logits.f32(), logits.f32() + logits.numel());
  return s;
}

// Mean over rows of KL(softmax(p) || softmax(q)), and the fraction of rows whose argmax agrees.
std::pair<double, double> kl_and_top1(const std::vector<float>& p, const std::vector<float>& q, int64_t vocab) {
  const int64_t rows = static_cast<int64_t>(p.size()) / vocab;
  double kl = 0, agree = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = p.data() + r * vocab;
    const float* b = q.data() + r * vocab;
    const double ma = *std::max_element(a, a + vocab), mb = *std::max_element(b, b + vocab);
    double za = 0, zb = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      za += std::exp(a[v] - ma);
      zb += std::exp(b[v] - mb);
    }
    double k = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      const double la = a[v] - ma - std::log(za), lb = b[v] - mb - std::log(zb);
      k += std::exp(la) * (la - lb);
    }
    kl += k;
    agree += (std::max_element(a, a + vocab) - a) == (std::max_element(b, b + vocab) - b);
  }
  return {kl / static_cast<double>(rows), agree / static_cast<double>(rows)};
}

struct QualityCase {
  std::string name, dir, profile;
  std::vector<std::string> sets;
  double min_cos;  // the smallest per-layer cosine the case must keep
  double max_kl;   // the largest step-1 logit KL (trained models only; random models: reported)
  double a8_min_cos = 0;  // fp8 profile: the same bounds for the W8A8 run (fp8 activations too)
  double a8_max_kl = -1;
};

// Per-layer cosine of every layer output (worst first) and the logit KL / top-1 agreement of both steps, of `b`
// against the source model's `a`; prints one line.
struct Score {
  double min_cos = 1, kl1 = 0, kl2 = 0;
  std::string worst;
};
Score score(const Steps& a, const Steps& b, const ModelRig& src, const std::string& label, const std::string& profile) {
  Score sc;
  std::string per_layer;
  for (const char* phase : {"enc", "dec"}) {
    for (int l = 0; l < src.ck.config.n_layers; ++l) {
      const std::string n = std::string(phase) + ".l" + std::to_string(l) + ".out";
      if (!a.enc.t.count(n) && !a.dec.t.count(n)) continue;
      const auto& m = std::string(phase) == "enc" ? a.enc.t : a.dec.t;
      const auto& m2 = std::string(phase) == "enc" ? b.enc.t : b.dec.t;
      const Diff d = compare(m2.at(n), m.at(n));
      EXPECT_TRUE(d.finite) << n;
      per_layer += fmt::format(" {:.5f}", d.cosine);
      if (d.cosine < sc.min_cos) {
        sc.min_cos = d.cosine;
        sc.worst = n;
      }
    }
    per_layer += " |";
  }
  const int64_t V = src.ck.config.vocab;
  double top1 = 0, top2 = 0;
  std::tie(sc.kl1, top1) = kl_and_top1(a.logits1, b.logits1, V);
  std::tie(sc.kl2, top2) = kl_and_top1(a.logits2, b.logits2, V);
  std::printf("  %-16s %-6s min cosine %.5f (%s), KL step1 %.3e step2 %.3e, top-1 agree %.3f %.3f\n    cosines:%s\n",
              label.c_str(), profile.c_str(), sc.min_cos, sc.worst.c_str(), sc.kl1, sc.kl2, top1, top2,
              per_layer.c_str());
  EXPECT_TRUE(std::isfinite(sc.kl1) && std::isfinite(sc.kl2));
  return sc;
}

class Quality : public ::testing::TestWithParam<QualityCase> {};

TEST_P(Quality, FormatErrorOnlyAndPerLayerCosine) {
  const QualityCase& q = GetParam();
  if (!std::filesystem::exists(q.dir)) GTEST_SKIP() << q.dir << " not present";
  const std::string pack = quantize_fixture("quality-" + q.name, q.dir, q.profile, q.sets);
  // bf16 activations throughout: the pack's weights are the only difference from the source.
  ModelRig src(q.dir), packed(pack, {}, "cpu", {}, "bf16"), twin(dequantised_twin(pack));
  const Steps a = run_steps(src), b = run_steps(packed), t = run_steps(twin);
  // The format's error, not a bug's: decoding then computing in f32 is exactly what the quantized engine does.
  EXPECT_EQ(b.logits1, t.logits1);
  EXPECT_EQ(b.logits2, t.logits2);
  const Score sc = score(a, b, src, q.name, q.profile);
  EXPECT_GE(sc.min_cos, q.min_cos) << sc.worst;
  if (q.max_kl > 0) {
    EXPECT_LE(sc.kl1, q.max_kl);
  }
  if (q.profile != "fp8") return;
  // The default arithmetic of fp8 experts (W8A8): the activations quantised per row as well.
  ModelRig w8a8(pack);
  const Score s8 = score(a, run_steps(w8a8), src, q.name, "fp8/a8");
  EXPECT_GE(s8.min_cos, q.a8_min_cos) << s8.worst;
  if (q.a8_max_kl > 0) {
    EXPECT_LE(s8.kl1, q.a8_max_kl);
  }
}

// Bounds: the measured values of docs/NUMERICS.md ("Quantized packs") with the error allowed to about double
// (1 - cosine) and triple (KL). Random-weight models amplify every weight error (their hidden states are chaotic),
// so their bounds are looser than the trained models'. models/dg-tiny is trained (docs/TRAINING.md, run 4) and
// takes the trained bounds; .cache/dg-tiny-trained (run 1, not committed) is checked when present.
std::vector<QualityCase> cases() {
  struct Bounds {
    const char* profile;
    double random_cos, trained_cos, trained_kl;
  };
  // measured (min over the random models; the worse of the two trained models): q4 0.97701, 0.99524, KL 2.3e-2;
  // q6 0.99767, 0.99876, 4.4e-3; nvfp4 0.96593, 0.99346, 3.2e-2; fp8 0.99753, 0.99874, 6.6e-3. The embedded
  // model's q4 and q6 rows leave the least margin (docs/NUMERICS.md). fp8 with fp8 activations (W8A8, 2026-12-01):
  // 0.99472, 0.99767, KL 1.52e-2.
  const Bounds bounds[] = {{"q4", 0.95, 0.992, 0.03}, {"q6", 0.995, 0.998, 0.005},
                           {"nvfp4", 0.93, 0.987, 0.1}, {"fp8", 0.995, 0.997, 0.02}};
  std::vector<QualityCase> out;
  const std::string a = source_path("tests/fixtures/tiny_a"), b = source_path("tests/fixtures/tiny_b");
  const std::string tiny = source_path("models/dg-tiny"), trained = source_path(".cache/dg-tiny-trained");
  for (const Bounds& bd : bounds) {
    const std::string p = bd.profile;
    // tiny_b's expert_ff of 24 fits no group format: its experts.down stays q8 in the group profiles.
    std::vector<std::string> b_sets;
    if (p != "fp8") b_sets = {"experts.down=q8"};
    out.push_back({"tiny_a_" + p, a, p, {}, bd.random_cos, -1, 0.989, -1});
    out.push_back({"tiny_b_" + p, b, p, b_sets, bd.random_cos, -1, 0.989, -1});
    out.push_back({"dg_tiny_" + p, tiny, p, {}, bd.trained_cos, bd.trained_kl, 0.995, 0.045});
    out.push_back({"dg_tiny_trained_" + p, trained, p, {}, bd.trained_cos, bd.trained_kl, 0.995, 0.045});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Profiles, Quality, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<QualityCase>& i) { return i.param.name; });

// --vocab-act fp8 on the unquantized model: the lm_head and the soft embedding over fp8 copies of the tied table,
// against the same model with the bf16 table (step 1's logits see the lm_head alone, step 2's also the soft
// embedding of step 1's logits). Bounds: about three times the KL measured (2026-12-03: step 1 / step 2 tiny_a
// 1.02e-2 / 3.62e-2, tiny_b 6.9e-3 / 1.89e-2, the embedded model 2.4e-3 / 3.84e-2; docs/NUMERICS.md).
TEST(VocabFp8Quality, LogitsAgainstTheBf16Table) {
  const struct {
    const char* dir;
    double max_kl1, max_kl2;
  } models[] = {{"tests/fixtures/tiny_a", 0.03, 0.11},
                {"tests/fixtures/tiny_b", 0.021, 0.057},
                {"models/dg-tiny", 0.0075, 0.12}};
  for (const auto& m : models) {
    SCOPED_TRACE(m.dir);
    ModelRig src(source_path(m.dir)), v8(source_path(m.dir));
    set_vocab_act(v8.weights, *v8.be, "fp8");
    const Steps a = run_steps(src), b = run_steps(v8);
    const Score sc = score(a, b, src, m.dir, "vocab8");
    EXPECT_LE(sc.kl1, m.max_kl1);
    EXPECT_LE(sc.kl2, m.max_kl2);
    EXPECT_GT(sc.kl1, 0.0) << "the fp8 table should change the logits";
  }
}

}  // namespace quality_test
}  // namespace dg::test
