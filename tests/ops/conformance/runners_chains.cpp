// Runners of the products that feed a residual chain as one op (Backend::linear_residual_norms, the attention's o
// projection into the post-attention chain; Backend::linear_moe_ffn_tail, the dense down projection into the MoE's
// feed-forward tail): the backend under test runs the fused op, the twin the product and then the chain's
// composition. The product's weight is in the case's format (fp8 with act8: a W8A8 product, with on_load its raw
// sums read by the chain); the MoE's experts are bf16.
#include "ops/conformance/runner.h"

namespace dg::test {

// rows, in, dim: attn = x w_o^T, h1 = h + rmsnorm(attn) w_post, then two norms of h1.
std::vector<Output> run_linear_residual_norms(const OpCase& c, const Side& s) {
  const int64_t rows = c.p.n("rows"), in = c.p.n("in"), dim = c.p.n("dim");
  const Shape shape{rows, dim};
  const Tensor x = activation(s, Shape{rows, in}, case_values(c, 1, rows * in, -2, 2, s.act));
  const Tensor w_o = weight(s, c, 2, Shape{dim, in}, -0.1f, 0.1f, c.weights, WeightUse::kLinear);
  const Tensor h = activation(s, shape, case_values(c, 3, shape.numel(), -4, 4, s.act));
  const Tensor w_post = norm_weight(s, c, 4, dim, 0.5f, 1.5f);
  const Tensor w_u = norm_weight(s, c, 5, dim, -1, 1), w_z = norm_weight(s, c, 6, dim, 0, 2);
  Tensor h1 = s.be.alloc(shape), u = s.be.alloc(shape), z = s.be.alloc(shape);
  const Tensor* w[] = {&w_u, &w_z};
  Tensor* outs[] = {&u, &z};
  if (s.twin) {
    Tensor attn = s.be.alloc(shape);
    s.be.linear(x, w_o, attn);
    s.be.rmsnorm(attn, &w_post, attn);
    s.be.add(h, attn, h1);
    for (int i = 0; i < 2; ++i) s.be.rmsnorm(h1, w[i], *outs[i]);
  } else {
    s.be.linear_residual_norms(x, w_o, h, w_post, h1, w, outs);
  }
  return {Output{"h1", to_host(s, h1), {}, {}}, Output{"out0", to_host(s, u), {}, {}},
          Output{"out1", to_host(s, z), {}, {}}};
}

// rows, hidden, ff, experts, top_k (the MoE), in, scalar (split, scalar2): m1 = x w_down^T [rows, hidden], then
// out = (h + rmsnorm(rmsnorm(m1) w1 + rmsnorm(moe(h, z)) w2) w) scalar, and the next layer's input norm of out (the
// backend under test may write it from the tail's launch: InputNorm).
std::vector<Output> run_linear_moe_ffn_tail(const OpCase& c, const Side& s) {
  const int64_t rows = c.p.n("rows"), in = c.p.n("in"), H = c.p.n("hidden");
  const int top_k = static_cast<int>(c.p.n("top_k"));
  const RowScalar scalar = case_scalar(c);
  const MoeInputs m = moe_inputs(c, s, DType::kBF16);
  const Tensor x = activation(s, Shape{rows, in}, case_values(c, 8, rows * in, -2, 2, s.act));
  const Tensor w_down = weight(s, c, 9, Shape{H, in}, -0.1f, 0.1f, c.weights, WeightUse::kLinear);
  const Tensor w1 = norm_weight(s, c, 10, H, 0.5f, 1.5f), w2 = norm_weight(s, c, 11, H, -1, 1);
  const Tensor wn = norm_weight(s, c, 12, H, 0, 2), w_next = norm_weight(s, c, 13, H, 0.5f, 1.5f);
  Tensor out = s.be.alloc(Shape{rows, H});
  InputNorm next{&w_next, s.be.alloc(Shape{rows, H}), {}, false};
  if (s.twin) {
    Tensor m1 = s.be.alloc(Shape{rows, H}), m2 = s.be.alloc(Shape{rows, H}), f = s.be.alloc(Shape{rows, H});
    s.be.linear(x, w_down, m1);
    s.be.moe(m.h, m.z, m.weights(), top_k, m2);
    s.be.rmsnorm(m1, &w1, m1);
    s.be.rmsnorm(m2, &w2, m2);
    s.be.add(m1, m2, f);
    s.be.rmsnorm(f, &wn, f);
    s.be.add(m.h, f, out);
    scale_rows(s, out, scalar);
  } else {
    s.be.linear_moe_ffn_tail(x, w_down, m.h, m.z, m.weights(), top_k, w1, w2, wn, scalar, out, nullptr, nullptr,
                             &next);
  }
  if (!next.filled) s.be.rmsnorm(out, &w_next, next.out);
  return {Output{"out", to_host(s, out), {}, {}}, Output{"next", to_host(s, next.out), {}, {}}};
}

}  // namespace dg::test
