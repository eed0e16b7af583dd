// fp8 activations (the W8A8 arithmetic of fp8 experts, LayerWeights::experts_act): the per-row E4M3 quantisation
// of the CPU twin on known values, moe_experts_cpu with act_fp8 as the composition of that quantisation with the
// plain expert products, set_expert_act's choices and refusals, and the same quantisation in fp8 linears
// (--linear-act) and in the lm_head over an fp8 table (--vocab-act).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "core/error.h"
#include "model/weights.h"
#include "ops/embed/embed.h"
#include "ops/glu/glu.h"
#include "ops/linear/linear.h"
#include "ops/moe/moe.h"
#include "quant/packed_tensor.h"
#include "support/compare.h"
#include "support/expect_error.h"

namespace dg {
namespace act_fp8_test {

TEST(ActFp8, QuantisesEachRowByItsAmax) {
  // Row 0: amax 448 (scale 1): E4M3 values stay; 1.0625 lies halfway between 1 and 1.125 and rounds to even (1);
  // 1.07 rounds up to 1.125. Row 1: all zero (scale 0). Row 2: amax 4.48 (scale 0.01): 2.24 is 224 * 0.01.
  std::vector<float> x = {448.0f, 1.0f, -0.5f, 1.0625f, 1.07f, 0.0f,  //
                          0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,         //
                          4.48f, 2.24f, -4.48f, 0.0f, 0.0f, 0.0f};
  act_quant_fp8_rows(x.data(), 3, 6);
  EXPECT_EQ(x[0], 448.0f);
  EXPECT_EQ(x[1], 1.0f);
  EXPECT_EQ(x[2], -0.5f);
  EXPECT_EQ(x[3], 1.0f);
  EXPECT_EQ(x[4], 1.125f);
  for (int i = 6; i < 12; ++i) EXPECT_EQ(x[static_cast<size_t>(i)], 0.0f);
  const float s = 4.48f / 448.0f;
  EXPECT_EQ(x[12], 448.0f * s);
  EXPECT_EQ(x[13], 224.0f * s);
  EXPECT_EQ(x[14], -448.0f * s);
}

Tensor random_tensor(Shape s, uint32_t seed, float sd) {
  Tensor t = host_tensor(DType::kF32, s);
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, sd);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = n(rng);
  return t;
}

// The experts with act_fp8 equal the same computation written out: each routed row's z quantised, gate_up, the
// gated GELU, the activation quantised, down, and the weighted sum in rank order (f32 storage).
TEST(ActFp8, ExpertsQuantiseBothInputsPerRow) {
  const int64_t rows = 5, hidden = 48, ff = 32, n_exp = 3;
  const int top_k = 2;
  const Tensor z = random_tensor(Shape{rows, hidden}, 7, 1.0f);
  const Tensor gate_up = pack_tensor(random_tensor(Shape{n_exp, 2 * ff, hidden}, 8, 0.05f), DType::kFp8);
  const Tensor down = pack_tensor(random_tensor(Shape{n_exp, hidden, ff}, 9, 0.05f), DType::kFp8);
  const Tensor gu = unpack_tensor(gate_up), dn = unpack_tensor(down);
  std::vector<int32_t> idx = {0, 1, 2, 0, 1, 2, 2, 1, 0, 2};
  std::vector<float> wt = {0.6f, 0.4f, 0.7f, 0.3f, 0.5f, 0.5f, 0.9f, 0.1f, 0.2f, 0.8f};
  std::vector<float> got(static_cast<size_t>(rows * hidden)), plain(got.size());
  moe_experts_cpu(z.f32(), rows, idx.data(), wt.data(), top_k, gate_up, down, Storage::kF32, got.data(), true);
  moe_experts_cpu(z.f32(), rows, idx.data(), wt.data(), top_k, gate_up, down, Storage::kF32, plain.data(), false);

  std::vector<float> want(got.size(), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> zq(z.f32() + r * hidden, z.f32() + (r + 1) * hidden);
    act_quant_fp8_rows(zq.data(), 1, hidden);
    std::vector<float> acc(static_cast<size_t>(hidden), 0.0f);
    for (int k = 0; k < top_k; ++k) {
      const int32_t e = idx[static_cast<size_t>(r * top_k + k)];
      std::vector<float> g(static_cast<size_t>(2 * ff)), a(static_cast<size_t>(ff)), y(static_cast<size_t>(hidden));
      linear_cpu_rows(zq.data(), 1, hidden, gu, e * 2 * ff, 2 * ff, g.data());
      for (int64_t f = 0; f < ff; ++f) a[static_cast<size_t>(f)] = gelu_tanh(g[static_cast<size_t>(f)]) * g[static_cast<size_t>(ff + f)];
      act_quant_fp8_rows(a.data(), 1, ff);
      linear_cpu_rows(a.data(), 1, ff, dn, e * hidden, hidden, y.data());
      for (int64_t c = 0; c < hidden; ++c)
        acc[static_cast<size_t>(c)] += wt[static_cast<size_t>(r * top_k + k)] * y[static_cast<size_t>(c)];
    }
    std::copy(acc.begin(), acc.end(), want.begin() + r * hidden);
  }
  EXPECT_EQ(got, want);
  EXPECT_NE(got, plain) << "the activation quantisation should be visible";
}

ModelWeights two_layers(DType gate_up_fmt, DType down_fmt) {
  ModelWeights w;
  w.layers.resize(2);
  for (LayerWeights& L : w.layers) {  // set_expert_act reads the formats only
    L.experts_gate_up.dtype = gate_up_fmt;
    L.experts_gate_up.shape = Shape{2, 32, 32};
    L.experts_down.dtype = down_fmt;
    L.experts_down.shape = Shape{2, 32, 16};
  }
  return w;
}

TEST(ActFp8, SetExpertActChoosesByFormat) {
  ModelWeights fp8 = two_layers(DType::kFp8, DType::kFp8), bf = two_layers(DType::kBF16, DType::kBF16);
  set_expert_act(fp8, "auto");
  set_expert_act(bf, "auto");
  EXPECT_EQ(fp8.layers[1].experts_act, DType::kFp8);
  EXPECT_EQ(bf.layers[1].experts_act, DType::kBF16);
  set_expert_act(fp8, "bf16");
  EXPECT_EQ(fp8.layers[0].experts_act, DType::kBF16);
  ModelWeights mixed = two_layers(DType::kFp8, DType::kQ4);
  set_expert_act(mixed, "auto");
  EXPECT_EQ(mixed.layers[0].experts_act, DType::kBF16);
  DG_EXPECT_ERROR(set_expert_act(bf, "fp8"), "--expert-act fp8 needs fp8 experts", "layer 0", "BF16");
  DG_EXPECT_ERROR(set_expert_act(bf, "int8"), "unknown expert activation 'int8'");
}

// fp8 linears with fp8 activations (BackendOptions::linear_act8): the CPU backend's linear quantises the input per
// row and then runs the plain product; other formats ignore the setting.
TEST(ActFp8, LinearAct8QuantisesTheInputOfFp8LinearsOnly) {
  const int64_t rows = 4, in = 32, out = 16;
  const Tensor x = random_tensor(Shape{rows, in}, 11, 1.0f);
  const Tensor w_src = random_tensor(Shape{out, in}, 12, 0.1f);
  BackendOptions o;
  o.linear_act8 = true;
  const std::unique_ptr<Backend> a8 = make_backend("cpu", o), plain = make_backend("cpu");
  for (DType fmt : {DType::kFp8, DType::kQ8}) {
    SCOPED_TRACE(std::string(dtype_name(fmt)));
    const Tensor w = pack_tensor(w_src, fmt);
    Tensor got = a8->alloc(Shape{rows, out}), bf = plain->alloc(Shape{rows, out});
    a8->linear(x, w, got);
    plain->linear(x, w, bf);
    std::vector<float> xq(x.f32(), x.f32() + x.numel()), want(static_cast<size_t>(rows * out));
    if (fmt == DType::kFp8) act_quant_fp8_rows(xq.data(), rows, in);
    linear_cpu(xq.data(), rows, in, w, want.data());
    EXPECT_EQ(std::vector<float>(got.f32(), got.f32() + got.numel()), want);
    const bool same = std::equal(got.f32(), got.f32() + got.numel(), bf.f32());
    EXPECT_EQ(same, fmt != DType::kFp8) << "fp8 weights: the quantised input should be visible; q8: no change";
  }
}

// An fp8 table (--vocab-act fp8): the CPU backend's fp8_table is the pack's fp8 format, and lm_head over it quantises
// y's rows first, then runs the plain product, the rounding and the softcap.
TEST(ActFp8, LmHeadOverAnFp8TableQuantisesItsRows) {
  const int64_t rows = 3, hidden = 32, vocab = 40;
  const Tensor y = random_tensor(Shape{rows, hidden}, 13, 1.0f), table = random_tensor(Shape{vocab, hidden}, 14, 0.1f);
  const std::unique_ptr<Backend> be = make_backend("cpu");
  const Tensor t8 = be->fp8_table(table, false), want_t8 = pack_tensor(table, DType::kFp8);
  ASSERT_EQ(t8.dtype, DType::kFp8);
  ASSERT_EQ(t8.nbytes(), want_t8.nbytes());
  EXPECT_EQ(std::memcmp(t8.data, want_t8.data, t8.nbytes()), 0);
  Tensor got = be->alloc_f32(Shape{rows, vocab}), plain = be->alloc_f32(Shape{rows, vocab});
  be->lm_head(y, t8, 30.0f, got);
  be->lm_head(y, unpack_tensor(t8), 30.0f, plain);
  std::vector<float> yq(y.f32(), y.f32() + y.numel()), want(static_cast<size_t>(rows * vocab));
  act_quant_fp8_rows(yq.data(), rows, hidden);
  linear_cpu(yq.data(), rows, hidden, t8, want.data());
  for (float& l : want) l = std::tanh(l / 30.0f) * 30.0f;  // f32 storage: no rounding before the cap
  EXPECT_EQ(std::vector<float>(got.f32(), got.f32() + got.numel()), want);
  EXPECT_FALSE(std::equal(got.f32(), got.f32() + got.numel(), plain.f32())) << "the quantised rows should be visible";
}

// The soft embedding over an fp8 transpose: the CPU backend's fp8_table(table, true) is the pack's fp8 rows of the
// transpose, and soft_embed over it quantises each row of probabilities (after their storage rounding, the tokens
// under a survivor cutoff zeroed) first.
TEST(ActFp8, SoftEmbedOverAnFp8TransposeQuantisesTheProbabilities) {
  const int64_t rows = 3, hidden = 16, vocab = 48;
  const Tensor logits = random_tensor(Shape{rows, vocab}, 15, 2.0f), table = random_tensor(Shape{vocab, hidden}, 16, 1.0f);
  Tensor tt = host_tensor(DType::kF32, Shape{hidden, vocab});
  for (int64_t v = 0; v < vocab; ++v)
    for (int64_t h = 0; h < hidden; ++h) tt.f32()[h * vocab + v] = table.f32()[v * hidden + h];
  const std::unique_ptr<Backend> be = make_backend("cpu");
  const Tensor t8 = be->fp8_table(table, true), want_t8 = pack_tensor(tt, DType::kFp8);
  ASSERT_EQ(t8.shape, (Shape{hidden, vocab}));
  ASSERT_EQ(t8.nbytes(), want_t8.nbytes());
  EXPECT_EQ(std::memcmp(t8.data, want_t8.data, t8.nbytes()), 0);
  std::vector<float> exact;  // the cutoff-0 result
  for (float cutoff : {0.0f, 0.05f}) {
    SCOPED_TRACE(cutoff);
    Tensor got = be->alloc(Shape{rows, hidden}), plain = be->alloc(Shape{rows, hidden});
    be->soft_embed(logits, t8, cutoff, got, nullptr);
    be->soft_embed(logits, table, cutoff, plain, nullptr);
    std::vector<float> p(static_cast<size_t>(rows * vocab)), want(static_cast<size_t>(rows * hidden));
    for (int64_t r = 0; r < rows; ++r) {  // softmax as soft_embed_cpu computes it (f32 storage: no rounding)
      const float* x = logits.f32() + r * vocab;
      float* pr = p.data() + r * vocab;
      const float mx = *std::max_element(x, x + vocab);
      double sum = 0.0;
      for (int64_t v = 0; v < vocab; ++v) sum += pr[v] = std::exp(x[v] - mx);
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t v = 0; v < vocab; ++v) pr[v] = pr[v] * inv < cutoff * inv ? 0.0f : pr[v] * inv;
    }
    act_quant_fp8_rows(p.data(), rows, vocab);
    linear_cpu(p.data(), rows, vocab, t8, want.data());
    const float scale = embed_scale(hidden, Storage::kF32);
    for (float& o : want) o *= scale;
    const std::vector<float> g(got.f32(), got.f32() + got.numel());
    EXPECT_EQ(g, want);
    const test::Diff d = test::compare(g, std::vector<float>(plain.f32(), plain.f32() + plain.numel()));
    EXPECT_GT(d.cosine, 0.99) << d.str();  // close to the bf16 table's, not equal
    EXPECT_GT(d.max_abs, 0.0) << d.str();
    if (cutoff == 0.0f) exact = g;
    else EXPECT_NE(g, exact) << "the cutoff should drop some tokens";
  }
}

TEST(ActFp8, VocabActModes) {
  EXPECT_TRUE(vocab_act_fp8("fp8").lm_head && vocab_act_fp8("fp8").soft_embed);
  EXPECT_TRUE(vocab_act_fp8("fp8-lm-head").lm_head && !vocab_act_fp8("fp8-lm-head").soft_embed);
  EXPECT_FALSE(vocab_act_fp8("bf16").lm_head || vocab_act_fp8("bf16").soft_embed);
  DG_EXPECT_ERROR(vocab_act_fp8("auto"), "unknown vocabulary activation 'auto'", "bf16, fp8 or fp8-lm-head");
}

TEST(ActFp8, LinearActModes) {
  EXPECT_TRUE(linear_act_fp8("auto"));
  EXPECT_TRUE(linear_act_fp8("fp8"));
  EXPECT_FALSE(linear_act_fp8("bf16"));
  DG_EXPECT_ERROR(linear_act_fp8("int8"), "unknown linear activation 'int8'");
  ModelWeights w = two_layers(DType::kFp8, DType::kFp8);  // fp8 experts, plain linears
  check_linear_act(w, "auto");
  check_linear_act(w, "bf16");
  DG_EXPECT_ERROR(check_linear_act(w, "fp8"), "--linear-act fp8 needs fp8 linears", "--profile fp8-all");
  w.layers[1].o.dtype = DType::kFp8;
  check_linear_act(w, "fp8");
}

}  // namespace act_fp8_test
}  // namespace dg
