// The CPU reference backend: every op is the CPU reference implementation from src/ops/, with outputs rounded
// through the configured activation storage.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/synthetic_fill.h"
#include "core/error.h"
#include "ops/attention/attention.h"
#include "ops/attention/attention_topk.h"
#include "ops/elementwise/synthetic_uniform.h"
#include "ops/embed/embed.h"
#include "ops/glu/glu.h"
#include "ops/linear/linear.h"
#include "ops/logits/logits.h"
#include "ops/moe/moe.h"
#include "ops/rmsnorm/rmsnorm.h"
#include "ops/rope/rope.h"
#include "ops/self_cond/self_cond.h"
#include "quant/packed_tensor.h"

namespace dg {
namespace {

int64_t rows_of(const Tensor& t) { return t.numel() / t.shape[t.shape.rank - 1]; }
int64_t cols_of(const Tensor& t) { return t.shape[t.shape.rank - 1]; }

// The decide op's CPU twin behind the Decider interface: the same decisions as the host path, in host memory.
class CpuDecider final : public Decider {
 public:
  explicit CpuDecider(Backend& be) : be_(be) {}
  void start(const DecideParams& p, std::span<const int32_t> canvas, uint64_t lcg,
             std::span<const LcgJump> jump) override {
    DG_CHECK(p.rows > 0 && canvas.size() == static_cast<size_t>(p.rows) && jump.size() >= 2 * canvas.size(),
             "decide: a canvas of {} for {} rows and {} jumps", canvas.size(), p.rows, jump.size());
    p_ = p;
    ids_ = be_.ids(canvas);
    jump_.assign(jump.begin(), jump.end());
    history_.assign(static_cast<size_t>(p.history) * canvas.size(), -1);
    prev_accept_.assign(canvas.size(), 0);
    stats_.assign(canvas.size(), RowStats{});
    u_.assign(p.categorical ? canvas.size() : 0, 0.0);
    drawn_.assign(u_.size(), 0);
    decide_start_cpu(p_, lcg, buffers());
  }
  const Tensor& ids() const override { return ids_; }
  DecideStatus step(const Tensor& logits, float temperature, Tensor& tempered) override {
    DG_CHECK(logits.shape[0] == p_.rows, "decide: logits of {} rows for a canvas of {}", logits.shape[0], p_.rows);
    be_.row_stats(logits, temperature, tempered, stats_.data());
    if (p_.categorical) {
      decide_uniforms_cpu(p_, buffers(), u_.data());
      be_.categorical(logits, temperature, u_, drawn_.data());
    }
    DecideStatus st;
    decide_cpu(p_, buffers(), stats_.data(), drawn_.data(), ids_.as<int32_t>(), &st);
    return st;
  }
  void read_stats(RowStats* host) override { std::copy(stats_.begin(), stats_.end(), host); }
  void read_canvas(int32_t* host) override { std::memcpy(host, ids_.data, ids_.nbytes()); }

 private:
  DecideBuffers buffers() { return DecideBuffers{&state_, history_.data(), prev_accept_.data(), jump_.data()}; }
  Backend& be_;
  DecideParams p_;
  DecideState state_;
  Tensor ids_;  // [rows] i32
  std::vector<LcgJump> jump_;
  std::vector<int32_t> history_;
  std::vector<uint8_t> prev_accept_;
  std::vector<RowStats> stats_;
  std::vector<double> u_;
  std::vector<int32_t> drawn_;
};

class CpuBackend final : public Backend, public SyntheticFill {
 public:
  CpuBackend(Precision p, float eps, bool linear_act8) : p_(p), eps_(eps), linear_act8_(linear_act8) {}
  std::string name() const override { return "cpu"; }
  Precision precision() const override { return p_; }

  Tensor alloc(Shape s) override { return host_tensor(DType::kF32, s); }
  Tensor alloc_f32(Shape s) override { return host_tensor(DType::kF32, s); }
  Tensor alloc_tempered(Shape s) override { return host_tensor(tempered_dtype(), s); }
  Tensor upload(const Tensor& host) override { return host; }
  Tensor ids(std::span<const int32_t> ids) override {
    Tensor t = host_tensor(DType::kI32, Shape{static_cast<int64_t>(ids.size())});
    if (!ids.empty()) std::memcpy(t.data, ids.data(), ids.size() * 4);
    return t;
  }
  void copy_to_host(const Tensor& t, float* dst) override { std::memcpy(dst, t.data, t.nbytes()); }
  void copy_from_host(const float* src, Tensor& t) override { std::memcpy(t.data, src, t.nbytes()); }

  void embed(const Tensor& ids, const Tensor& table, Tensor& out) override {
    embed_cpu(ids.as<int32_t>(), ids.numel(), table, embed_scale(table.shape[1], p_.act), p_.act, out.f32());
  }
  void rmsnorm(const Tensor& x, const Tensor* w, Tensor& out) override {
    rmsnorm_cpu(x.f32(), rows_of(x), cols_of(x), w, eps_, out.f32());
    round_all(out);
  }
  void linear(const Tensor& x, const Tensor& w, Tensor& out) override {
    if (linear_act8_ && w.dtype == DType::kFp8) {  // W8A8: the input replaced by its per-row E4M3 values
      std::vector<float> xq(x.f32(), x.f32() + x.numel());
      act_quant_fp8_rows(xq.data(), rows_of(x), cols_of(x));
      linear_cpu(xq.data(), rows_of(x), cols_of(x), w, out.f32());
    } else {
      linear_cpu(x.f32(), rows_of(x), cols_of(x), w, out.f32());
    }
    round_all(out);
  }
  void rope(Tensor& x, int64_t pos0, const std::vector<float>& inv_freq) override {
    const int64_t rows = x.shape[0];
    std::vector<int64_t> pos(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) pos[static_cast<size_t>(r)] = pos0 + r;
    rope_cpu(x.f32(), rows, x.shape[1], x.shape[2], pos.data(), inv_freq.data(), p_.act);
  }
  void add(const Tensor& a, const Tensor& b, Tensor& out) override {
    DG_CHECK(a.numel() == b.numel() && a.numel() == out.numel(), "add: shapes {} {} {}", a.shape.str(),
             b.shape.str(), out.shape.str());
    for (int64_t i = 0; i < a.numel(); ++i) out.f32()[i] = round_to(p_.act, a.f32()[i] + b.f32()[i]);
  }
  void scale(Tensor& x, float s) override {
    for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = round_to(p_.act, x.f32()[i] * s);
  }
  void gelu_mul(const Tensor& gate, const Tensor& up, Tensor& out) override {
    gelu_mul_cpu(gate.f32(), up.f32(), gate.numel(), p_.act, out.f32());
  }

  void attention(const Tensor& q, int64_t q_pos0, const KvLayer& kv, int64_t cache_from, int64_t cache_to,
                 const Tensor& k_fresh, const Tensor& v_fresh, int64_t fresh_pos0, bool causal, int64_t window,
                 Tensor& out) override {
    attention_topk(q, q_pos0, kv, cache_from, cache_to, k_fresh, v_fresh, fresh_pos0, causal, window, AttnTopk{}, out);
  }
  void attention_topk(const Tensor& q, int64_t q_pos0, const KvLayer& kv, int64_t cache_from, int64_t cache_to,
                      const Tensor& k_fresh, const Tensor& v_fresh, int64_t fresh_pos0, bool causal, int64_t window,
                      const AttnTopk& topk, Tensor& out) override {
    const int64_t n_heads = q.shape[1], D = q.shape[2];
    const int64_t n_kv = k_fresh.shape[1];
    const int64_t n_cached = cache_to - cache_from;
    std::vector<float> kc(static_cast<size_t>(n_cached * n_kv * D)), vc(kc.size());
    if (n_cached > 0) {
      DG_CHECK(kv.k.device == Device::kCpu && kv.k.dtype == DType::kF32 && kv.k.shape[1] * kv.k.shape[2] == n_kv * D,
               "the CPU backend needs a host f32 KV cache of {} values a row (got {} {})", n_kv * D,
               dtype_name(kv.k.dtype), kv.k.shape.str());
      kv_read_cpu(kv.k.f32(), kv.v.f32(), n_kv * D, kv.cap, kv.ring, cache_from, n_cached, kc.data(), vc.data());
    }
    AttnKeys cached{kc.data(), vc.data(), cache_from, n_cached};
    AttnKeys fresh{k_fresh.f32(), v_fresh.f32(), fresh_pos0, k_fresh.shape[0]};
    attention_topk_cpu(q.f32(), q.shape[0], q_pos0, cached, fresh, AttnShape{n_heads, n_kv, D}, causal, window, topk,
                       p_.act, out.f32());
  }
  void kv_write(const KvLayer& kv, int64_t pos0, const Tensor& k, const Tensor& v) override {
    const int64_t n = k.shape[0];
    if (n == 0) return;
    KvLayer dst = kv;  // a view: the cache's storage
    kv_write_cpu(k.f32(), v.f32(), n, k.numel() / n, pos0, dst.k.f32(), dst.v.f32(), kv.cap, kv.ring, kv.storage);
  }

  void moe(const Tensor& h, const Tensor& z, const MoeWeights& w, int top_k, Tensor& out) override {
    const int64_t rows = rows_of(h);
    std::vector<int32_t> idx(static_cast<size_t>(rows * top_k));
    std::vector<float> wt(idx.size());
    moe_route_cpu(h.f32(), rows, w.router_scale, w.router_proj, w.per_expert_scale, top_k, eps_, p_.act, idx.data(),
                  wt.data());
    moe_experts_cpu(z.f32(), rows, idx.data(), wt.data(), top_k, w.gate_up, w.down, p_.act, out.f32(),
                    w.act == DType::kFp8);
  }
  void lm_head(const Tensor& y, const Tensor& embed, float softcap, Tensor& logits) override {
    lm_head_softcap_cpu(y.f32(), rows_of(y), embed, softcap, p_.act, logits.f32());
  }
  Tensor fp8_table(const Tensor& table, bool transpose) override {
    if (!transpose) return pack_tensor(table, DType::kFp8);
    DG_CHECK(table.shape.rank == 2, "fp8 table: a [vocab, hidden] table, not {}", table.shape.str());
    const int64_t V = table.shape[0], H = table.shape[1];
    const Tensor f = unpack_tensor(table);
    Tensor t = host_tensor(DType::kF32, Shape{H, V});
    for (int64_t v = 0; v < V; ++v)
      for (int64_t h = 0; h < H; ++h) t.f32()[h * V + v] = f.f32()[v * H + h];
    return pack_tensor(t, DType::kFp8);
  }
  void soft_embed(const Tensor& sc_logits, const Tensor& embed, float sparse_cutoff, Tensor& out,
                  const Tensor*) override {
    const int64_t hidden = embed.dtype == DType::kFp8 ? embed.shape[0] : embed.shape[1];  // fp8: the transpose
    soft_embed_cpu(sc_logits.data, sc_logits.dtype, rows_of(sc_logits), embed, embed_scale(hidden, p_.act), p_.act,
                   sparse_cutoff, out.f32());
  }
  void row_stats(const Tensor& logits, float temperature, Tensor& tempered, RowStats* host_stats) override {
    // The reference stores the tempered logits in the model dtype for self-conditioning: rounded f32 values, or
    // the 16-bit values themselves (alloc_tempered).
    DG_CHECK(tempered.dtype == DType::kF32 || tempered.dtype == tempered_dtype(),
             "row_stats: tempered logits stored as {} under {} activations", dtype_name(tempered.dtype),
             storage_name(p_.act));
    row_stats_cpu(logits.f32(), rows_of(logits), cols_of(logits), temperature, tempered.data, tempered.dtype,
                  host_stats);
    if (tempered.dtype == DType::kF32) round_all(tempered);
  }
  std::unique_ptr<Decider> make_decider() override { return std::make_unique<CpuDecider>(*this); }
  void configure_kv(KvOptions& o, int64_t context) override {
    o.storage = p_.kv;
    o.initial_capacity = std::min<int64_t>(context, 4096);  // host caches grow on demand
  }
  void synchronize() override {}
  void fill_uniform(Tensor& t, uint64_t seed, float scale, float offset) override {
    for (int64_t i = 0; i < t.numel(); ++i)
      t.f32()[i] = round_to(p_.act, synthetic_uniform(seed, static_cast<uint64_t>(i), scale, offset));
  }
  Tensor synthetic_packed(DType fmt, Shape s, uint64_t, float) override {
    fail("the cpu backend cannot make synthetic {} weights {} (--weights other than bf16 needs --backend cuda)",
         dtype_name(fmt), s.str());
  }
  void categorical(const Tensor& logits, float temperature, std::span<const double> u, int32_t* host_ids) override {
    const int64_t V = cols_of(logits);
    std::vector<float> x(static_cast<size_t>(V));
    for (size_t r = 0; r < u.size(); ++r) {
      const float* row = logits.f32() + static_cast<int64_t>(r) * V;
      for (int64_t v = 0; v < V; ++v) x[static_cast<size_t>(v)] = row[v] / temperature;
      host_ids[r] = categorical_draw(x.data(), V, u[r]);
    }
  }

 private:
  // The tempered logits in 16 bits where the activations are rounded to 16 bits (exact), else f32.
  DType tempered_dtype() const {
    return p_.act == Storage::kBF16 ? DType::kBF16 : p_.act == Storage::kF16 ? DType::kF16 : DType::kF32;
  }
  void round_all(Tensor& t) const {
    if (p_.act == Storage::kF32) return;
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = round_to(p_.act, t.f32()[i]);
  }
  Precision p_;
  float eps_;
  bool linear_act8_;  // fp8 linears take fp8 activations (BackendOptions::linear_act8)
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& o) {
  return std::make_unique<CpuBackend>(o.precision, o.rms_eps, o.linear_act8);
}

}  // namespace dg
