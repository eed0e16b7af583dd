#include "ops/moe/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "ops/glu/glu.h"
#include "ops/linear/linear.h"
#include "ops/rmsnorm/rmsnorm.h"
#include "quant/codec.h"

namespace dg {

void moe_route_cpu(const float* h, int64_t rows, const Tensor& scale, const Tensor& proj, const Tensor& per_expert_scale,
                   int top_k, float eps, Storage act, int32_t* idx, float* weight) {
  const int64_t hidden = proj.shape[1], n_exp = proj.shape[0];
  DG_CHECK(top_k >= 1 && top_k <= n_exp, "moe_route: top_k {} outside [1, {}]", top_k, n_exp);
  std::vector<float> r(static_cast<size_t>(rows * hidden));
  rmsnorm_cpu(h, rows, hidden, nullptr, eps, r.data());
  std::vector<float> sc(static_cast<size_t>(hidden)), pes(static_cast<size_t>(n_exp));
  convert_to_f32(scale.data, scale.dtype, sc.size(), sc.data());
  convert_to_f32(per_expert_scale.data, per_expert_scale.dtype, pes.size(), pes.data());
  const float root = router_root(hidden);
  for (int64_t i = 0; i < rows * hidden; ++i) {
    const float normed = round_to(act, r[static_cast<size_t>(i)]);
    r[static_cast<size_t>(i)] = round_to(act, round_to(act, normed * sc[static_cast<size_t>(i % hidden)]) * root);
  }
  std::vector<float> scores(static_cast<size_t>(rows * n_exp));
  linear_cpu(r.data(), rows, hidden, proj, scores.data());
  for (int64_t r0 = 0; r0 < rows; ++r0) {
    float* s = scores.data() + r0 * n_exp;
    float mx = -INFINITY;
    for (int64_t e = 0; e < n_exp; ++e) mx = std::max(mx, s[e] = round_to(act, s[e]));
    double sum = 0.0;
    std::vector<float> p(static_cast<size_t>(n_exp));
    for (int64_t e = 0; e < n_exp; ++e) sum += p[static_cast<size_t>(e)] = std::exp(s[e] - mx);
    for (float& v : p) v = static_cast<float>(v / sum);
    std::vector<int32_t> order(static_cast<size_t>(n_exp));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)];
    });
    float wsum = 0.0f;
    for (int k = 0; k < top_k; ++k) wsum += p[static_cast<size_t>(order[static_cast<size_t>(k)])];
    for (int k = 0; k < top_k; ++k) {
      const int32_t e = order[static_cast<size_t>(k)];
      idx[r0 * top_k + k] = e;
      weight[r0 * top_k + k] = (p[static_cast<size_t>(e)] / wsum) * pes[static_cast<size_t>(e)];
    }
  }
}

void act_quant_fp8_rows(float* x, int64_t rows, int64_t K) {
  std::vector<uint8_t> codes(static_cast<size_t>(K));
  float scale = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* const planes[kMaxPlanes] = {codes.data(), reinterpret_cast<uint8_t*>(&scale)};
    encode_rows(DType::kFp8, x + r * K, 1, K, 0.0f, planes);
    decode_rows(DType::kFp8, planes, 1, K, 0.0f, x + r * K);
  }
}

void moe_experts_cpu(const float* z, int64_t rows, const int32_t* idx, const float* weight, int top_k,
                     const Tensor& gate_up, const Tensor& down, Storage act, float* out, bool act_fp8) {
  const int64_t n_exp = gate_up.shape[0], two_ff = gate_up.shape[1], hidden = gate_up.shape[2];
  const int64_t ff = two_ff / 2;
  DG_CHECK(down.shape[0] == n_exp && down.shape[1] == hidden && down.shape[2] == ff,
           "moe_experts: down {} does not match gate_up {}", down.shape.str(), gate_up.shape.str());
  // Group (row, rank) pairs by expert so each expert's weights are converted once.
  std::vector<std::vector<int64_t>> routed(static_cast<size_t>(n_exp));
  for (int64_t i = 0; i < rows * top_k; ++i) {
    const int32_t e = idx[i];
    DG_CHECK(e >= 0 && e < n_exp, "moe_experts: expert index {} out of range", e);
    routed[static_cast<size_t>(e)].push_back(i);
  }
  std::vector<float> y(static_cast<size_t>(rows * top_k * hidden));  // y[row*top_k + rank]
  parallel_for(n_exp, 1, [&](int64_t e0, int64_t e1) {
    std::vector<float> zin, gu, a;
    for (int64_t e = e0; e < e1; ++e) {
      const auto& list = routed[static_cast<size_t>(e)];
      if (list.empty()) continue;
      const int64_t m = static_cast<int64_t>(list.size());
      zin.resize(static_cast<size_t>(m * hidden));
      for (int64_t j = 0; j < m; ++j)
        std::copy_n(z + (list[static_cast<size_t>(j)] / top_k) * hidden, hidden, zin.data() + j * hidden);
      if (act_fp8) act_quant_fp8_rows(zin.data(), m, hidden);
      gu.resize(static_cast<size_t>(m * two_ff));
      linear_cpu_rows(zin.data(), m, hidden, gate_up, e * two_ff, two_ff, gu.data());
      a.resize(static_cast<size_t>(m * ff));
      for (int64_t j = 0; j < m; ++j) {
        const float* g = gu.data() + j * two_ff;
        for (int64_t f = 0; f < ff; ++f) {
          const float gv = round_to(act, g[f]), uv = round_to(act, g[ff + f]);
          a[static_cast<size_t>(j * ff + f)] = round_to(act, round_to(act, gelu_tanh(gv)) * uv);
        }
      }
      if (act_fp8) act_quant_fp8_rows(a.data(), m, ff);
      std::vector<float> ye(static_cast<size_t>(m * hidden));
      linear_cpu_rows(a.data(), m, ff, down, e * hidden, hidden, ye.data());
      for (int64_t j = 0; j < m; ++j)
        for (int64_t c = 0; c < hidden; ++c)
          y[static_cast<size_t>(list[static_cast<size_t>(j)] * hidden + c)] =
              round_to(act, ye[static_cast<size_t>(j * hidden + c)]);
    }
  });
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < hidden; ++c) {
      float acc = 0.0f;
      for (int k = 0; k < top_k; ++k) acc += weight[r * top_k + k] * y[static_cast<size_t>((r * top_k + k) * hidden + c)];
      out[r * hidden + c] = round_to(act, acc);
    }
  }
}

}  // namespace dg
