// The Backend's default ops: the fused forms as the compositions of the unfused ops (what the CPU reference runs,
// and what a backend without a fused kernel falls back to), and the refusals of optional features.
#include "backend/backend.h"

#include <algorithm>

#include "backend/synthetic_fill.h"
#include "core/error.h"

namespace dg {

void Backend::check_weight(const Tensor&, WeightUse, const std::string&) const {}

Tensor Backend::fp8_table(const Tensor&, bool) {
  fail("the {} backend has no fp8 lm_head (use --vocab-act bf16)", name());
}

OpenLogits Backend::lm_head_open(const Tensor& y, const Tensor& embed, float softcap, Tensor& logits, Tensor*) {
  lm_head(y, embed, softcap, logits);
  return {};
}

void Backend::finish_logits(Tensor&, const OpenLogits& open, int64_t) {
  DG_CHECK(!open.open, "the {} backend cannot finish logits another backend's lm_head left open", name());
}

DecideStatus Decider::step_open(Tensor& logits, const OpenLogits& open, float temperature, Tensor& tempered) {
  DG_CHECK(!open.open, "this backend's decider cannot finish logits an lm_head left open");
  return step(logits, temperature, tempered);
}

void Backend::row_stats_open(Tensor& logits, const OpenLogits& open, int64_t, float temperature, Tensor& tempered,
                             RowStats* host_stats, bool) {
  DG_CHECK(!open.open, "the {} backend cannot finish logits another backend's lm_head left open", name());
  row_stats(logits, temperature, tempered, host_stats);
}

void Backend::linears(const Tensor& x, std::span<const Tensor* const> w, std::span<Tensor* const> out) {
  DG_CHECK(w.size() == out.size(), "linears: {} weights for {} outputs", w.size(), out.size());
  for (size_t i = 0; i < w.size(); ++i)
    if (w[i] != nullptr) linear(x, *w[i], *out[i]);
}

RowCodes Backend::row_codes(const Tensor&, std::span<const Tensor* const>) { return {}; }

MoeInputs Backend::moe_inputs(const Tensor&, const MoeWeights&) { return {}; }

void Backend::moe_route_ahead(const Tensor&, const MoeWeights&, int, MoeInputs&) {}

void Backend::rmsnorm_codes(const Tensor& x, const Tensor* w, Tensor& out, RowCodes& codes) {
  codes.filled = false;
  rmsnorm(x, w, out);
}

void Backend::gated_linear(const Tensor& x, const Tensor& gate, const Tensor& up, Tensor& out, const RowCodes*,
                           RowCodes* out_codes) {
  if (out_codes != nullptr) out_codes->filled = false;
  Tensor u = alloc(out.shape);
  linear(x, gate, out);
  linear(x, up, u);
  gelu_mul(out, u, out);  // elementwise: in place
}

void Backend::attention_topk(const Tensor& q, int64_t q_pos0, const KvLayer& kv, int64_t cache_from, int64_t cache_to,
                             const Tensor& k_fresh, const Tensor& v_fresh, int64_t fresh_pos0, bool causal,
                             int64_t window, const AttnTopk& topk, Tensor& out) {
  DG_CHECK(!topk.on(), "the {} backend has no top-k attention (attention top-k {}); use off", name(),
           attn_topk_name(topk));
  attention(q, q_pos0, kv, cache_from, cache_to, k_fresh, v_fresh, fresh_pos0, causal, window, out);
}

void Backend::attention_segments(const Tensor& q, std::span<const AttnSegment> segs, const Tensor& k_fresh,
                                 const Tensor& v_fresh, bool causal, int64_t window, Tensor& out) {
  for (const AttnSegment& g : segs) {
    Tensor o = row_slice(out, g.row0, g.rows);
    attention(row_slice(q, g.row0, g.rows), g.pos0, *g.kv, g.cache_from, g.cache_to, row_slice(k_fresh, g.row0, g.rows),
              row_slice(v_fresh, g.row0, g.rows), g.pos0, causal, window, o);
  }
}

void Backend::residual_norms(const Tensor& h, Tensor& attn, const Tensor& w_post, Tensor& h1,
                             std::span<const Tensor* const> w, std::span<Tensor* const> out) {
  DG_CHECK(w.size() == out.size(), "residual_norms: {} weights for {} outputs", w.size(), out.size());
  rmsnorm(attn, &w_post, attn);
  add(h, attn, h1);
  for (size_t i = 0; i < w.size(); ++i) rmsnorm(h1, w[i], *out[i]);
}

void Backend::ffn_tail(const Tensor& h1, Tensor& m1, const Tensor& w1, Tensor& m2, const Tensor& w2, const Tensor& w,
                       RowScalar s, Tensor& out) {
  rmsnorm(m1, &w1, m1);
  rmsnorm(m2, &w2, m2);
  Tensor f = alloc(m1.shape);
  add(m1, m2, f);
  rmsnorm(f, &w, f);
  add(h1, f, out);
  const int64_t rows = out.numel() / out.shape[out.shape.rank - 1], split = std::min(s.split, rows);
  if (split > 0) {
    Tensor head = row_slice(out, 0, split);
    scale(head, s.first);
  }
  if (split < rows) {
    Tensor tail = row_slice(out, split, rows - split);
    scale(tail, s.rest);
  }
}

void Backend::linear_residual_norms(const Tensor& x, const Tensor& w_o, const Tensor& h, const Tensor& w_post,
                                    Tensor& h1, std::span<const Tensor* const> w, std::span<Tensor* const> out,
                                    RowCodes* out0_codes, MoeInputs* moe_in) {
  if (out0_codes != nullptr) out0_codes->filled = false;
  if (moe_in != nullptr) moe_in->filled = false;
  Tensor attn = alloc(Shape{x.numel() / x.shape[x.shape.rank - 1], w_o.shape[0]});
  linear(x, w_o, attn);
  residual_norms(h, attn, w_post, h1, w, out);
}

void Backend::linear_moe_ffn_tail(const Tensor& x, const Tensor& w_down, const Tensor& h, const Tensor& z,
                                  const MoeWeights& w, int top_k, const Tensor& w1, const Tensor& w2,
                                  const Tensor& wn, RowScalar s, Tensor& out, const RowCodes*,
                                  const MoeInputs* moe_in, InputNorm* next) {
  Tensor m1 = alloc(Shape{x.numel() / x.shape[x.shape.rank - 1], w_down.shape[0]});
  linear(x, w_down, m1);
  stage("moe");
  moe_ffn_tail(h, z, w, top_k, m1, w1, w2, wn, s, out, moe_in, next);
}

void Backend::moe_ffn_tail(const Tensor& h, const Tensor& z, const MoeWeights& w, int top_k, Tensor& m1,
                           const Tensor& w1, const Tensor& w2, const Tensor& wn, RowScalar s, Tensor& out,
                           const MoeInputs*, InputNorm* next) {
  if (next != nullptr) next->filled = next->codes.filled = false;
  Tensor m2 = alloc(h.shape);
  moe(h, z, w, top_k, m2);
  ffn_tail(h, m1, w1, m2, w2, wn, s, out);
}

void Backend::rmsnorm_rope(const Tensor& x, const Tensor* w, Tensor& out, int64_t pos0,
                           const std::vector<float>& inv_freq) {
  rmsnorm(x, w, out);
  rope(out, pos0, inv_freq);
}

void Backend::qkv_heads(const Tensor& a, std::span<const Tensor* const> w, const Tensor* q_norm, const Tensor& k_norm,
                        std::span<const RopeSpan> spans, const std::vector<float>& inv_freq, Tensor* qn, Tensor& kn,
                        Tensor& vn, FreshKvCopy* copy, const RowCodes*) {
  if (copy != nullptr) *copy = {};  // none here
  DG_CHECK(w.size() == 3 && w[1] != nullptr && (w[0] == nullptr) == (qn == nullptr) && !spans.empty(),
           "qkv_heads: weights {{q, k, v}} with k, qn exactly when q, and at least one span");
  const int64_t rows = a.shape[0], n_kv = kn.shape[1], D = kn.shape[2];
  Tensor k = alloc(Shape{rows, n_kv * D}), v = k, q;
  if (w[2] != nullptr) v = alloc(Shape{rows, n_kv * D});
  if (qn != nullptr) q = alloc(Shape{rows, qn->shape[1] * D});
  Tensor* outs[] = {&q, &k, &v};
  linears(a, w, outs);
  const auto norm_rope = [&](const Tensor& x, const Tensor* wn, Tensor& out) {
    if (spans.size() == 1) {
      rmsnorm_rope(x, wn, out, spans[0].pos0, inv_freq);
    } else {
      rmsnorm(x, wn, out);
      rope_spans(out, spans, inv_freq);
    }
  };
  norm_rope(k.reshaped(Shape{rows, n_kv, D}), &k_norm, kn);
  rmsnorm(v.reshaped(Shape{rows, n_kv, D}), nullptr, vn);
  if (qn != nullptr) norm_rope(q.reshaped(Shape{rows, qn->shape[1], D}), q_norm, *qn);
}

void Backend::rope_spans(Tensor& x, std::span<const RopeSpan> spans, const std::vector<float>& inv_freq) {
  for (const RopeSpan& sp : spans) {
    Tensor part = row_slice(x, sp.row0, sp.rows);
    rope(part, sp.pos0, inv_freq);
  }
}

void Backend::fail_no_graphs() const {
  fail("the {} backend does not capture graphs (graphs need --backend cuda and a graph-safe MoE kernel)", name());
}

SyntheticFill& synthetic_fill(Backend& be) {
  auto* f = dynamic_cast<SyntheticFill*>(&be);
  DG_CHECK(f != nullptr, "the {} backend cannot generate synthetic weights", be.name());
  return *f;
}

}  // namespace dg
