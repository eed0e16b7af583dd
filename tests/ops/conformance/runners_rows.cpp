// Runners of the row-wise ops: the norms and their fused chains, RoPE, the gated GELU, the elementwise ops, the
// embedding and the synthetic fill.
#include "backend/synthetic_fill.h"
#include "ops/conformance/runner.h"
#include "support/seeded.h"

namespace dg::test {
namespace {

Output out(std::string name, const Side& s, const Tensor& t) { return Output{std::move(name), to_host(s, t), {}, {}}; }

}  // namespace

// rows, dim, weighted; heads > 0: x is [rows, heads, dim].
std::vector<Output> run_rmsnorm(const OpCase& c, const Side& s) {
  const int64_t rows = c.p.n("rows"), dim = c.p.n("dim"), heads = c.p.has("heads") ? c.p.n("heads") : 0;
  const Shape shape = heads > 0 ? Shape{rows, heads, dim} : Shape{rows, dim};
  const Tensor x = activation(s, shape, case_values(c, 1, shape.numel(), -3, 3, s.act));
  const Tensor w = norm_weight(s, c, 2, dim, 0.5f, 1.5f);
  Tensor y = s.be.alloc(shape);
  s.be.rmsnorm(x, c.p.n("weighted") != 0 ? &w : nullptr, y);
  return {out("out", s, y)};
}

// rows, heads, dim, rotated, pos0; the twin: rmsnorm then rope.
std::vector<Output> run_rmsnorm_rope(const OpCase& c, const Side& s) {
  const int64_t rows = c.p.n("rows"), heads = c.p.n("heads"), dim = c.p.n("dim"), pos0 = c.p.n("pos0");
  const Shape shape{rows, heads, dim};
  const Tensor x = activation(s, shape, case_values(c, 1, shape.numel(), -3, 3, s.act));
  const Tensor w = norm_weight(s, c, 2, dim, 0.5f, 1.5f);
  const std::vector<float>& freqs = rope_freqs(dim, c.p.n("rotated"));
  Tensor y = s.be.alloc(shape);
  if (s.twin) {
    s.be.rmsnorm(x, &w, y);
    s.be.rope(y, pos0, freqs);
  } else {
    s.be.rmsnorm_rope(x, &w, y, pos0, freqs);
  }
  return {out("out", s, y)};
}

std::vector<Output> run_rope(const OpCase& c, const Side& s) {
  const int64_t rows = c.p.n("rows"), heads = c.p.n("heads"), dim = c.p.n("dim");
  const Shape shape{rows, heads, dim};
  Tensor x = activation(s, shape, case_values(c, 1, shape.numel(), -2, 2, s.act));
  s.be.rope(x, c.p.n("pos0"), rope_freqs(dim, c.p.n("rotated")));
  return {out("out", s, x)};
}

// rows, heads, dim, rotated, spans, gap: `spans` sequences of rows / spans rows each (the last takes the rest), span k
// at positions 1000 k + 7 (gap 1: the middle rows of each span are left out of it, as rows of no sequence); the
// twin rotates each span with rope().
std::vector<Output> run_rope_spans(const OpCase& c, const Side& s) {
  const int64_t rows = c.p.n("rows"), heads = c.p.n("heads"), dim = c.p.n("dim"), n = c.p.n("spans");
  const Shape shape{rows, heads, dim};
  Tensor x = activation(s, shape, case_values(c, 1, shape.numel(), -2, 2, s.act));
  const std::vector<float>& freqs = rope_freqs(dim, c.p.n("rotated"));
  std::vector<RopeSpan> spans;
  const int64_t per = rows / n;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t row0 = k * per, len = k + 1 == n ? rows - row0 : per;
    if (c.p.n("gap") != 0 && len > 2) {  // two spans around one untouched middle row
      spans.push_back(RopeSpan{row0, len / 2, 1000 * k + 7});
      spans.push_back(RopeSpan{row0 + len / 2 + 1, len - len / 2 - 1, 1000 * k + 7 + len / 2 + 1});
    } else {
      spans.push_back(RopeSpan{row0, len, 1000 * k + 7});
    }
  }
  if (s.twin) {
    for (const RopeSpan& sp : spans) {
      Tensor part = row_slice(x, sp.row0, sp.rows);
      s.be.rope(part, sp.pos0, freqs);
    }
  } else {
    s.be.rope_spans(x, spans, freqs);
  }
  return {out("out", s, x)};
}

// rows, in, heads (0: k and v only), kv, dim, rotated, v (0: V is the raw K product), spans (sequences of equal
// rows, the last takes the rest, at positions 1000 k + 7), apart (1: the weights not side by side); the weights in
// the case's format. Both sides run qkv_heads; the twin's is the default composition.
std::vector<Output> run_qkv_heads(const OpCase& c, const Side& s) {
  const int64_t rows = c.p.n("rows"), in = c.p.n("in"), heads = c.p.n("heads"), kv = c.p.n("kv"), dim = c.p.n("dim");
  const Tensor a = activation(s, Shape{rows, in}, case_values(c, 1, rows * in, -2, 2, s.act));
  Tensor w[3];
  const int64_t widths[3] = {heads * dim, kv * dim, c.p.n("v") != 0 ? kv * dim : 0};
  for (int i = 0; i < 3; ++i)
    if (widths[i] > 0)
      w[i] = weight(s, c, 2 + static_cast<uint64_t>(i), Shape{widths[i], in}, -0.1f, 0.1f, c.weights,
                    WeightUse::kLinear);
  if (c.p.n("apart") == 0) {
    Tensor* group[] = {&w[0], &w[1], &w[2]};
    s.be.place_side_by_side(group);
  }
  const Tensor* ws[3] = {};
  for (int i = 0; i < 3; ++i) ws[i] = w[i].empty() ? nullptr : &w[i];
  const Tensor q_norm = norm_weight(s, c, 5, dim, 0.5f, 1.5f), k_norm = norm_weight(s, c, 6, dim, 0.5f, 1.5f);
  std::vector<RopeSpan> spans;
  const int64_t n = c.p.n("spans"), per = rows / n;
  for (int64_t k = 0; k < n; ++k) spans.push_back(RopeSpan{k * per, k + 1 == n ? rows - k * per : per, 1000 * k + 7});
  Tensor qn, kn = s.be.alloc(Shape{rows, kv, dim}), vn = s.be.alloc(Shape{rows, kv, dim});
  if (heads > 0) qn = s.be.alloc(Shape{rows, heads, dim});
  s.be.qkv_heads(a, ws, heads > 0 ? &q_norm : nullptr, k_norm, spans, rope_freqs(dim, c.p.n("rotated")),
                 heads > 0 ? &qn : nullptr, kn, vn, nullptr);
  std::vector<Output> outs;
  if (heads > 0) outs.push_back(out("q", s, qn));
  outs.push_back(out("k", s, kn));
  outs.push_back(out("v", s, vn));
  return outs;
}

std::vector<Output> run_gelu_mul(const OpCase& c, const Side& s) {
  const Shape shape{c.p.n("rows"), c.p.n("cols")};
  const Tensor g = activation(s, shape, case_values(c, 1, shape.numel(), -4, 4, s.act));
  const Tensor u = activation(s, shape, case_values(c, 2, shape.numel(), -2, 2, s.act));
  Tensor y = s.be.alloc(shape);
  s.be.gelu_mul(g, u, y);
  return {out("out", s, y)};
}

std::vector<Output> run_add(const OpCase& c, const Side& s) {
  const Shape shape{c.p.n("rows"), c.p.n("cols")};
  const Tensor a = activation(s, shape, case_values(c, 1, shape.numel(), -4, 4, s.act));
  const Tensor b = activation(s, shape, case_values(c, 2, shape.numel(), -30, 30, s.act));
  Tensor y = s.be.alloc(shape);
  s.be.add(a, b, y);
  return {out("out", s, y)};
}

std::vector<Output> run_scale(const OpCase& c, const Side& s) {
  const Shape shape{c.p.n("rows"), c.p.n("cols")};
  Tensor x = activation(s, shape, case_values(c, 1, shape.numel(), -4, 4, s.act));
  s.be.scale(x, static_cast<float>(c.p.f("s")));
  return {out("out", s, x)};
}

std::vector<Output> run_fill_uniform(const OpCase& c, const Side& s) {
  Tensor t = s.be.alloc(Shape{c.p.n("n")});
  synthetic_fill(s.be).fill_uniform(t, static_cast<uint64_t>(c.p.n("seed")), static_cast<float>(c.p.f("scale")),
                                    static_cast<float>(c.p.f("offset")));
  return {out("out", s, t)};
}

// rows, dim: h1 = h + rmsnorm(attn) w_post, then three norms of h1 (the last without scale); the twin composes.
std::vector<Output> run_residual_norms(const OpCase& c, const Side& s) {
  const int64_t rows = c.p.n("rows"), dim = c.p.n("dim");
  const Shape shape{rows, dim};
  const Tensor h = activation(s, shape, case_values(c, 1, shape.numel(), -4, 4, s.act));
  Tensor attn = activation(s, shape, case_values(c, 2, shape.numel(), -30, 30, s.act));
  const Tensor w_post = norm_weight(s, c, 3, dim, 0.5f, 1.5f);
  const Tensor w_u = norm_weight(s, c, 4, dim, -1, 1), w_z = norm_weight(s, c, 5, dim, 0, 2);
  Tensor h1 = s.be.alloc(shape), u = s.be.alloc(shape), z = s.be.alloc(shape), r = s.be.alloc(shape);
  const Tensor* w[] = {&w_u, &w_z, nullptr};
  Tensor* outs[] = {&u, &z, &r};
  if (s.twin) {
    s.be.rmsnorm(attn, &w_post, attn);
    s.be.add(h, attn, h1);
    for (int i = 0; i < 3; ++i) s.be.rmsnorm(h1, w[i], *outs[i]);
  } else {
    s.be.residual_norms(h, attn, w_post, h1, w, outs);
  }
  return {out("h1", s, h1), out("out0", s, u), out("out1", s, z), out("out2 (no scale)", s, r)};
}

// rows, dim, scalar (split, scalar2): out = (h1 + rmsnorm(rmsnorm(m1) w1 + rmsnorm(m2) w2) w) scalar; the twin
// composes.
std::vector<Output> run_ffn_tail(const OpCase& c, const Side& s) {
  const int64_t rows = c.p.n("rows"), dim = c.p.n("dim");
  const Shape shape{rows, dim};
  const RowScalar scalar = case_scalar(c);
  const Tensor h1 = activation(s, shape, case_values(c, 1, shape.numel(), -4, 4, s.act));
  Tensor m1 = activation(s, shape, case_values(c, 2, shape.numel(), -2, 2, s.act));
  Tensor m2 = activation(s, shape, case_values(c, 3, shape.numel(), -50, 50, s.act));
  const Tensor w1 = norm_weight(s, c, 4, dim, 0.5f, 1.5f), w2 = norm_weight(s, c, 5, dim, -1, 1);
  const Tensor w = norm_weight(s, c, 6, dim, 0, 2);
  Tensor y = s.be.alloc(shape);
  if (s.twin) {
    s.be.rmsnorm(m1, &w1, m1);
    s.be.rmsnorm(m2, &w2, m2);
    Tensor f = s.be.alloc(shape);
    s.be.add(m1, m2, f);
    s.be.rmsnorm(f, &w, f);
    s.be.add(h1, f, y);
    scale_rows(s, y, scalar);
  } else {
    s.be.ffn_tail(h1, m1, w1, m2, w2, w, scalar, y);
  }
  return {out("out", s, y)};
}

// rows ids from [0, vocab) into a [vocab, hidden] table.
std::vector<Output> run_embed(const OpCase& c, const Side& s) {
  const int64_t rows = c.p.n("rows"), vocab = c.p.n("vocab"), hidden = c.p.n("hidden");
  const std::vector<int32_t> ids =
      seeded_ids(static_cast<size_t>(rows), case_seed(c, 1), 0, static_cast<int32_t>(vocab));
  const Tensor table = weight(s, c, 2, Shape{vocab, hidden}, -1.4f, 1.4f, DType::kBF16, WeightUse::kPlain);
  Tensor y = s.be.alloc(Shape{rows, hidden});
  s.be.embed(s.be.ids(ids), table, y);
  return {out("out", s, y)};
}

}  // namespace dg::test
