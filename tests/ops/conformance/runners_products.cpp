// Runners of the products: linear (any weight format), the fused linears and gated_linear against their
// composition, the lm_head with its softcap, the self-conditioning soft embedding, and the MoE (router inputs with
// wide margins at the top_k boundary, so both sides pick the same experts).
#include <string>

#include "core/error.h"
#include "ops/conformance/runner.h"
#include "support/seeded.h"

namespace dg::test {
namespace {

// The twin attaches S (the sum of |products|) to a product's output, for bounds with a rel_sum term.
Output product(std::string name, const Side& s, const Tensor& y, const std::vector<float>& x, int64_t rows,
               int64_t in, const Tensor& w_host) {
  Output o{std::move(name), to_host(s, y), {}, {}};
  if (s.twin) o.abs_sum = abs_products(x, rows, in, w_host);
  return o;
}

}  // namespace

// rows, in, out; the weight in the case's format.
std::vector<Output> run_linear(const OpCase& c, const Side& s) {
  const int64_t rows = c.p.n("rows"), in = c.p.n("in"), out = c.p.n("out");
  const std::vector<float> xv = case_values(c, 1, rows * in, -2, 2, s.act);
  const Tensor x = activation(s, Shape{rows, in}, xv);
  Tensor w_host;
  const Tensor w = weight(s, c, 2, Shape{out, in}, -0.1f, 0.1f, c.weights, WeightUse::kLinear, &w_host);
  Tensor y = s.be.alloc(Shape{rows, out});
  s.be.linear(x, w, y);
  return {product("out", s, y, xv, rows, in, w_host)};
}

// rows, in, out0..out2 (0: no weight), placed side by side as the model uploads q/k/v; the twin: linear each.
std::vector<Output> run_linears(const OpCase& c, const Side& s) {
  const int64_t rows = c.p.n("rows"), in = c.p.n("in");
  const std::vector<float> xv = case_values(c, 1, rows * in, -2, 2, s.act);
  const Tensor x = activation(s, Shape{rows, in}, xv);
  Tensor host[3], dev[3], y[3];
  const Tensor* ws[3] = {};
  Tensor* ys[3] = {};
  for (int i = 0; i < 3; ++i) {
    const int64_t n = c.p.n("out" + std::to_string(i));
    if (n == 0) continue;
    dev[i] = weight(s, c, 2 + static_cast<uint64_t>(i), Shape{n, in}, -0.1f, 0.1f, c.weights, WeightUse::kLinear,
                    &host[i]);
    y[i] = s.be.alloc(Shape{rows, n});
    ys[i] = &y[i];
  }
  Tensor* group[] = {&dev[0], &dev[1], &dev[2]};
  s.be.place_side_by_side(group);
  for (int i = 0; i < 3; ++i) ws[i] = dev[i].empty() ? nullptr : &dev[i];
  if (s.twin) {
    for (int i = 0; i < 3; ++i)
      if (ws[i] != nullptr) s.be.linear(x, *ws[i], y[i]);
  } else {
    Tensor unused = s.be.alloc(Shape{1, 1});  // outputs of skipped weights are never written
    for (Tensor*& p : ys)
      if (p == nullptr) p = &unused;
    s.be.linears(x, ws, ys);
  }
  std::vector<Output> outs;
  for (int i = 0; i < 3; ++i)
    if (ws[i] != nullptr) outs.push_back(product("out" + std::to_string(i), s, y[i], xv, rows, in, host[i]));
  return outs;
}

// rows, in, ff: gelu(x gate^T) * (x up^T) with gate and up placed side by side; the twin: two linears and gelu_mul.
std::vector<Output> run_gated_linear(const OpCase& c, const Side& s) {
  const int64_t rows = c.p.n("rows"), in = c.p.n("in"), ff = c.p.n("ff");
  const Tensor x = activation(s, Shape{rows, in}, case_values(c, 1, rows * in, -2, 2, s.act));
  Tensor gate = weight(s, c, 2, Shape{ff, in}, -0.15f, 0.15f, c.weights, WeightUse::kLinear);
  Tensor up = weight(s, c, 3, Shape{ff, in}, -0.15f, 0.15f, c.weights, WeightUse::kLinear);
  Tensor* group[] = {&gate, &up};
  s.be.place_side_by_side(group);
  Tensor y = s.be.alloc(Shape{rows, ff});
  if (s.twin) {
    Tensor g = s.be.alloc(Shape{rows, ff}), u = s.be.alloc(Shape{rows, ff});
    s.be.linear(x, gate, g);
    s.be.linear(x, up, u);
    s.be.gelu_mul(g, u, y);
  } else {
    s.be.gated_linear(x, gate, up, y);
  }
  return {Output{"out", to_host(s, y), {}, {}}};
}

// rows, hidden, vocab, softcap: final-normed rows against the tied table (an fp8 case: its fp8_table).
std::vector<Output> run_lm_head(const OpCase& c, const Side& s) {
  const int64_t rows = c.p.n("rows"), hidden = c.p.n("hidden"), vocab = c.p.n("vocab");
  const std::vector<float> yv = case_values(c, 1, rows * hidden, -3, 3, s.act);
  const Tensor y = activation(s, Shape{rows, hidden}, yv);
  Tensor table_host;
  Tensor table = weight(s, c, 2, Shape{vocab, hidden}, -0.1f, 0.1f, DType::kBF16, WeightUse::kPlain, &table_host);
  if (c.weights == DType::kFp8) table = s.be.fp8_table(table, false);  // each side's own quantiser
  Tensor logits = s.be.alloc_f32(Shape{rows, vocab});
  s.be.lm_head(y, table, static_cast<float>(c.p.f("softcap")), logits);
  return {product("logits", s, logits, yv, rows, hidden, table_host)};
}

// rows, vocab, hidden, cutoff: tempered logits in the activation storage against the table (an fp8 case: the fp8
// rows of its transpose).
std::vector<Output> run_soft_embed(const OpCase& c, const Side& s) {
  const int64_t rows = c.p.n("rows"), vocab = c.p.n("vocab"), hidden = c.p.n("hidden");
  const Tensor logits = activation(s, Shape{rows, vocab}, case_values(c, 1, rows * vocab, -8, 8, s.act));
  Tensor table = weight(s, c, 2, Shape{vocab, hidden}, -1.4f, 1.4f, DType::kBF16, WeightUse::kPlain);
  if (c.weights == DType::kFp8) table = s.be.fp8_table(table, true);  // each side's own transpose and quantiser
  Tensor y = s.be.alloc(Shape{rows, hidden});
  s.be.soft_embed(logits, table, static_cast<float>(c.p.f("cutoff")), y, nullptr);
  return {Output{"out", to_host(s, y), {}, {}}};
}

// rows, hidden, ff, experts, top_k, act_fp8. Each row's residual puts its top_k experts' coordinates at 1.6 or more
// (after the router scale) and the others' at 0.96 or less; the router projection reads coordinate e for expert e
// alone, so the top_k-th and the next expert's scores sit far more than a bf16 rounding apart.
MoeInputs moe_inputs(const OpCase& c, const Side& s, DType experts) {
  const int64_t rows = c.p.n("rows"), H = c.p.n("hidden"), ff = c.p.n("ff"), E = c.p.n("experts");
  const int top_k = static_cast<int>(c.p.n("top_k"));
  DG_CHECK(E <= H, "moe case '{}': the router construction needs experts <= hidden", c.name);
  std::vector<float> h = case_values(c, 1, rows * H, -0.3f, 0.3f, Storage::kF32);
  const uint64_t pick = case_seed(c, 2);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<bool> chosen(static_cast<size_t>(E), false);
    for (int k = 0, i = 0; k < top_k; ++i) {
      const double u = seeded_unit(pick, static_cast<uint64_t>(r * 1000 + i));
      const auto e = static_cast<size_t>(u * static_cast<double>(E));
      if (e < chosen.size() && !chosen[e]) chosen[e] = true, ++k;
    }
    for (int64_t e = 0; e < E; ++e) {
      const double u = seeded_unit(pick + 1, static_cast<uint64_t>(r * E + e));
      h[static_cast<size_t>(r * H + e)] = static_cast<float>(chosen[static_cast<size_t>(e)] ? 2.0 + 0.2 * u : 0.8 * u);
    }
  }
  for (float& v : h) v = round_to(s.act, v);
  MoeInputs m;
  m.h = activation(s, Shape{rows, H}, h);
  m.z = activation(s, Shape{rows, H}, case_values(c, 3, rows * H, -2, 2, s.act));
  Tensor proj_host = host_tensor(DType::kF32, Shape{E, H});
  for (int64_t e = 0; e < E; ++e) proj_host.f32()[e * H + e] = 6.0f;
  s.be.check_weight(proj_host, WeightUse::kPlain, c.name);
  m.proj = s.be.upload(proj_host);
  m.scale = weight(s, c, 4, Shape{H}, 0.8f, 1.2f, DType::kBF16, WeightUse::kPlain);
  m.per_expert = weight(s, c, 5, Shape{E}, 0.5f, 1.5f, DType::kBF16, WeightUse::kPlain);
  m.gate_up = weight(s, c, 6, Shape{E, 2 * ff, H}, -0.1f, 0.1f, experts, WeightUse::kExperts);
  m.down = weight(s, c, 7, Shape{E, H, ff}, -0.1f, 0.1f, experts, WeightUse::kExperts);
  m.act = c.p.has("act_fp8") && c.p.n("act_fp8") != 0 ? DType::kFp8 : DType::kBF16;
  return m;
}

std::vector<Output> run_moe(const OpCase& c, const Side& s) {
  const MoeInputs m = moe_inputs(c, s, c.weights);
  Tensor y = s.be.alloc(m.h.shape);
  s.be.moe(m.h, m.z, m.weights(), static_cast<int>(c.p.n("top_k")), y);
  return {Output{"out", to_host(s, y), {}, {}}};
}

}  // namespace dg::test
