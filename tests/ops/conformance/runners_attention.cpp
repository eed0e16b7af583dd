// The attention runners (dense and top-k): a cache layer as the backend stores it (configure_kv), filled by kv_write
// from position 0 in chunks (a ring wraps before it is read), then attention over cached positions [from, to) and
// fresh rows at to..
// Every input is representable in bf16 and in f16 (tiny magnitudes flushed to zero), so the bf16 activations, the f16
// cache and the f32 twin hold the same numbers.
#include <algorithm>
#include <cmath>

#include "ops/conformance/runner.h"

namespace dg::test {
namespace {

std::vector<float> kv_values(const OpCase& c, uint64_t input, int64_t n, float amax) {
  std::vector<float> v = case_values(c, input, n, -amax, amax, Storage::kBF16);
  for (float& x : v)
    if (std::fabs(x) < 0x1p-14f) x = 0.0f;  // below f16's normal range a bf16 value may not be an f16 one
  return v;
}

std::vector<float> rows_of(const std::vector<float>& v, int64_t row, int64_t from, int64_t n) {
  return std::vector<float>(v.begin() + from * row, v.begin() + (from + n) * row);
}

// The inputs of an attention case on one side: the cache layer filled from position 0, the queries and fresh rows.
struct AttnInputs {
  KvLayer L;
  Tensor q, kf, vf;
};

AttnInputs attn_inputs(const OpCase& c, const Side& s, float q_amax) {
  const int64_t heads = c.p.n("heads"), n_kv = c.p.n("kv_heads"), D = c.p.n("head_dim"), rows = c.p.n("rows");
  const int64_t cap = c.p.n("cap"), to = c.p.n("to"), row = n_kv * D;
  KvOptions o;
  s.be.configure_kv(o, cap);
  AttnInputs in;
  KvLayer& L = in.L;
  L.cap = cap;
  L.ring = c.p.n("ring") != 0;
  L.storage = o.storage;
  const Shape slots{cap, n_kv, D};
  L.k = o.device_alloc ? o.device_alloc(slots) : host_tensor(DType::kF32, slots);
  L.v = o.device_alloc ? o.device_alloc(slots) : host_tensor(DType::kF32, slots);
  const std::vector<float> ck = kv_values(c, 1, to * row, 1.5f), cv = kv_values(c, 2, to * row, 1.0f);
  constexpr int64_t kChunk = 50;
  for (int64_t p = 0; p < to; p += kChunk) {
    const int64_t n = std::min(kChunk, to - p);
    const Tensor k = activation(s, Shape{n, n_kv, D}, rows_of(ck, row, p, n));
    const Tensor v = activation(s, Shape{n, n_kv, D}, rows_of(cv, row, p, n));
    s.be.kv_write(L, p, k, v);
  }
  in.q = activation(s, Shape{rows, heads, D}, kv_values(c, 3, rows * heads * D, q_amax));
  in.kf = activation(s, Shape{rows, n_kv, D}, kv_values(c, 4, rows * row, 1.5f));
  in.vf = activation(s, Shape{rows, n_kv, D}, kv_values(c, 5, rows * row, 1.0f));
  return in;
}

}  // namespace

// heads, kv_heads, head_dim, rows, cap, from, to, ring, causal, window.
std::vector<Output> run_attention(const OpCase& c, const Side& s) {
  const AttnInputs in = attn_inputs(c, s, 2.0f);
  const int64_t to = c.p.n("to");
  Tensor out = s.be.alloc(Shape{c.p.n("rows"), c.p.n("heads") * c.p.n("head_dim")});
  s.be.attention(in.q, to, in.L, c.p.n("from"), to, in.kf, in.vf, to, c.p.n("causal") != 0, c.p.n("window"), out);
  return {Output{"out", to_host(s, out), {}, {}}};
}

// The same and topk (0: dyn, K > 0: K keys). Queries in [-6/sqrt(D), 6/sqrt(D)] give scores of standard deviation
// ~3, so a row's softmax spreads over tens of keys and the kept set shapes the output.
std::vector<Output> run_attention_topk(const OpCase& c, const Side& s) {
  const int64_t D = c.p.n("head_dim"), to = c.p.n("to"), k = c.p.n("topk");
  const AttnInputs in = attn_inputs(c, s, 6.0f / std::sqrt(static_cast<float>(D)));
  const AttnTopk topk = k > 0 ? AttnTopk{AttnTopk::Mode::kFixed, k} : AttnTopk{AttnTopk::Mode::kDyn, 0};
  Tensor out = s.be.alloc(Shape{c.p.n("rows"), c.p.n("heads") * D});
  s.be.attention_topk(in.q, to, in.L, c.p.n("from"), to, in.kf, in.vf, to, c.p.n("causal") != 0, c.p.n("window"),
                      topk, out);
  return {Output{"out", to_host(s, out), {}, {}}};
}

}  // namespace dg::test
