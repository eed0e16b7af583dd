#include "ops/conformance/runner.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "ops/linear/linear.h"
#include "quant/packed_tensor.h"
#include "support/seeded.h"

namespace dg::test {

OpRunner op_runner(const std::string& op) {
  static const std::map<std::string, OpRunner> runners = {
      {"rmsnorm", run_rmsnorm},
      {"rmsnorm_rope", run_rmsnorm_rope},
      {"rope", run_rope},
      {"rope_spans", run_rope_spans},
      {"qkv_heads", run_qkv_heads},
      {"gelu_mul", run_gelu_mul},
      {"add", run_add},
      {"scale", run_scale},
      {"fill_uniform", run_fill_uniform},
      {"residual_norms", run_residual_norms},
      {"ffn_tail", run_ffn_tail},
      {"embed", run_embed},
      {"linear", run_linear},
      {"linears", run_linears},
      {"gated_linear", run_gated_linear},
      {"lm_head", run_lm_head},
      {"soft_embed", run_soft_embed},
      {"moe", run_moe},
      {"linear_residual_norms", run_linear_residual_norms},
      {"linear_moe_ffn_tail", run_linear_moe_ffn_tail},
      {"attention", run_attention},
      {"attention_topk", run_attention_topk},
      {"row_stats", run_row_stats},
      {"categorical", run_categorical},
      {"decide", run_decide},
  };
  const auto it = runners.find(op);
  return it == runners.end() ? nullptr : it->second;
}

std::vector<std::string> runner_ops() {
  return {"rmsnorm",    "rmsnorm_rope", "rope",       "rope_spans", "qkv_heads", "gelu_mul",  "add",         "scale",     "fill_uniform",
          "residual_norms", "ffn_tail", "embed",      "linear",    "linears",     "gated_linear", "lm_head",
          "soft_embed", "moe",          "attention",  "attention_topk", "row_stats", "categorical", "decide",
          "linear_residual_norms", "linear_moe_ffn_tail"};
}

Tensor norm_weight(const Side& s, const OpCase& c, uint64_t input, int64_t dim, float lo, float hi) {
  return weight(s, c, input, Shape{dim}, lo, hi, DType::kBF16, WeightUse::kPlain);
}

RowScalar case_scalar(const OpCase& c) {
  const auto first = static_cast<float>(c.p.f("scalar"));
  if (!c.p.has("split")) return RowScalar(first);
  return RowScalar(first, c.p.n("split"), static_cast<float>(c.p.f("scalar2")));
}

void scale_rows(const Side& s, Tensor& t, const RowScalar& r) {
  const int64_t rows = t.shape[0], split = std::min(r.split, rows);
  if (split > 0) {
    Tensor head = row_slice(t, 0, split);
    s.be.scale(head, r.first);
  }
  if (split < rows) {
    Tensor tail = row_slice(t, split, rows - split);
    s.be.scale(tail, r.rest);
  }
}

uint64_t case_seed(const OpCase& c, uint64_t input) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the case's id
  for (char ch : c.id()) h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
  return h + input * 0x9E3779B97F4A7C15ull;
}

std::vector<float> case_values(const OpCase& c, uint64_t input, int64_t n, float lo, float hi, Storage round) {
  return seeded_uniform(static_cast<size_t>(n), case_seed(c, input), lo, hi, round);
}

Tensor activation(const Side& s, Shape shape, const std::vector<float>& v, bool f32) {
  Tensor t = f32 ? s.be.alloc_f32(shape) : s.be.alloc(shape);
  if (!v.empty()) s.be.copy_from_host(v.data(), t);
  return t;
}

std::vector<float> to_host(const Side& s, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  if (!v.empty()) s.be.copy_to_host(t, v.data());
  return v;
}

Tensor weight(const Side& s, const OpCase& c, uint64_t input, Shape shape, float lo, float hi, DType fmt, WeightUse use,
              Tensor* host) {
  const std::vector<float> v = case_values(c, input, shape.numel(), lo, hi, Storage::kBF16);
  Tensor h = host_tensor(DType::kF32, shape);
  std::copy(v.begin(), v.end(), h.f32());
  if (dtype_is_packed(fmt)) h = pack_tensor(h, fmt);
  s.be.check_weight(h, use, c.name);
  if (host != nullptr) *host = h;
  return s.be.upload(h);
}

std::vector<float> abs_products(const std::vector<float>& x, int64_t rows, int64_t in, const Tensor& w) {
  Tensor wa = unpack_tensor(w);
  for (int64_t i = 0; i < wa.numel(); ++i) wa.f32()[i] = std::fabs(wa.f32()[i]);
  std::vector<float> xa(x.size());
  for (size_t i = 0; i < x.size(); ++i) xa[i] = std::fabs(x[i]);
  const int64_t out = wa.numel() / in;
  std::vector<float> sum(static_cast<size_t>(rows * out));
  linear_cpu(xa.data(), rows, in, wa.reshaped(Shape{out, in}), sum.data());
  return sum;
}

const std::vector<float>& rope_freqs(int64_t dim, int64_t rotated) {
  static std::map<std::pair<int64_t, int64_t>, std::vector<float>> made;  // never erased: stable addresses
  auto [it, fresh] = made.try_emplace({dim, rotated});
  if (fresh) {
    it->second.assign(static_cast<size_t>(dim / 2), 0.0f);
    for (int64_t i = 0; i < rotated && i < dim / 2; ++i)
      it->second[static_cast<size_t>(i)] =
          static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(dim)));
  }
  return it->second;
}

}  // namespace dg::test
