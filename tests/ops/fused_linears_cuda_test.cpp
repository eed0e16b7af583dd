// The CUDA backend's fused products against the unfused ones on the same backend: upload() stores q/k/v and
// gate/up side by side, linears() then runs one product and splits it, gated_linear() one product and the gated
// GELU of its halves; the router kernel against an f64 loop. Skipped without a GPU.
#include <gtest/gtest.h>

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_check.h"
#include "core/dtype.h"
#include "diffusion/rng.h"
#include "model/weights.h"
#include "ops/moe/moe.h"

namespace dg {
namespace {

std::vector<float> uniform(size_t n, uint64_t seed, float scale) {
  Lcg rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = round_bf16(static_cast<float>((rng.uniform() * 2 - 1) * scale));
  return v;
}

float max_abs_diff(Backend& be, const Tensor& a, const Tensor& b) {
  std::vector<float> x(static_cast<size_t>(a.numel())), y(x.size());
  be.copy_to_host(a, x.data());
  be.copy_to_host(b, y.data());
  float d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::max(d, std::fabs(x[i] - y[i]));
  return d;
}

TEST(FusedLinearsCuda, MatchTheSeparateProducts) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine";
  const int64_t H = 256, Nq = 512, Nkv = 128, I = 384, rows = 77;
  std::vector<std::vector<float>> store;
  auto host = [&](Shape s, uint64_t seed) {
    store.push_back(uniform(static_cast<size_t>(s.numel()), seed, 0.2f));
    return host_view(store.back().data(), DType::kF32, s);
  };
  ModelWeights h;
  h.layers.resize(1);
  LayerWeights& L = h.layers[0];
  store.reserve(8);
  L.q = host(Shape{Nq, H}, 1);
  L.k = host(Shape{Nkv, H}, 2);
  L.v = host(Shape{Nkv, H}, 3);
  L.gate = host(Shape{I, H}, 4);
  L.up = host(Shape{I, H}, 5);
  const auto be = make_cuda_backend(1e-6f, 0);
  const ModelWeights d = be->upload(h);
  const LayerWeights& D = d.layers[0];
  ASSERT_EQ(D.k.data, static_cast<const char*>(D.q.data) + D.q.nbytes()) << "q, k, v not side by side";
  ASSERT_EQ(D.v.data, static_cast<const char*>(D.k.data) + D.k.nbytes());
  ASSERT_EQ(D.up.data, static_cast<const char*>(D.gate.data) + D.gate.nbytes()) << "gate, up not side by side";

  Tensor x = be->alloc(Shape{rows, H});
  const auto xs = uniform(static_cast<size_t>(rows * H), 6, 2.0f);
  be->copy_from_host(xs.data(), x);
  Tensor q = be->alloc(Shape{rows, Nq}), k = be->alloc(Shape{rows, Nkv}), v = be->alloc(Shape{rows, Nkv});
  Tensor q1 = be->alloc(Shape{rows, Nq}), k1 = be->alloc(Shape{rows, Nkv}), v1 = be->alloc(Shape{rows, Nkv});
  const Tensor* all[] = {&D.q, &D.k, &D.v};
  Tensor* outs[] = {&q, &k, &v};
  be->linears(x, all, outs);
  be->linear(x, D.q, q1);
  be->linear(x, D.k, k1);
  be->linear(x, D.v, v1);
  // The same bf16 inputs and f32 sums: equal up to the summation order of whichever GEMM cuBLAS picks.
  for (auto [a, b] : {std::pair{&q, &q1}, std::pair{&k, &k1}, std::pair{&v, &v1}})
    EXPECT_LE(max_abs_diff(*be, *a, *b), 2e-2f);
  // k and v alone (the encoder's cache-only pass) are side by side too.
  const Tensor* kv_only[] = {nullptr, &D.k, &D.v};
  Tensor k2 = be->alloc(Shape{rows, Nkv}), v2 = be->alloc(Shape{rows, Nkv});
  Tensor* outs2[] = {&q, &k2, &v2};
  be->linears(x, kv_only, outs2);
  EXPECT_LE(max_abs_diff(*be, k2, k1), 2e-2f);
  EXPECT_LE(max_abs_diff(*be, v2, v1), 2e-2f);

  Tensor g = be->alloc(Shape{rows, I}), g1 = be->alloc(Shape{rows, I});
  be->gated_linear(x, D.gate, D.up, g);
  be->Backend::gated_linear(x, D.gate, D.up, g1);
  EXPECT_LE(max_abs_diff(*be, g, g1), 2e-2f);
  std::vector<float> gv(static_cast<size_t>(g.numel()));
  be->copy_to_host(g, gv.data());
  EXPECT_TRUE(std::all_of(gv.begin(), gv.end(), [](float f) { return std::isfinite(f); }));
  EXPECT_GT(*std::max_element(gv.begin(), gv.end()), 0.1f);  // not all zero
}

TEST(RouterScoresCuda, MatchesAnF64Loop) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine";
  struct Case {
    int64_t rows, hidden, experts;
  };
  for (const Case& c : {Case{256, 2816, 128}, Case{37, 72, 5}, Case{1000, 64, 8}, Case{3, 6144, 40}}) {
    const auto x = uniform(static_cast<size_t>(c.rows * c.hidden), 7, 1.0f);
    const auto w = uniform(static_cast<size_t>(c.experts * c.hidden), 8, 0.1f);
    std::vector<uint16_t> xb(x.size()), wb(w.size()), got(static_cast<size_t>(c.rows * c.experts));
    for (size_t i = 0; i < x.size(); ++i) xb[i] = f32_to_bf16(x[i]);
    for (size_t i = 0; i < w.size(); ++i) wb[i] = f32_to_bf16(w[i]);
    void *dx = nullptr, *dw = nullptr, *ds = nullptr;
    ASSERT_EQ(cudaMalloc(&dx, xb.size() * 2), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dw, wb.size() * 2), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&ds, got.size() * 2), cudaSuccess);
    cudaMemcpy(dx, xb.data(), xb.size() * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dw, wb.data(), wb.size() * 2, cudaMemcpyHostToDevice);
    const Status s = moe_router_scores_cuda(dx, dw, c.rows, c.hidden, c.experts, ds, nullptr);
    ASSERT_TRUE(s.is_ok()) << s.message();
    ASSERT_EQ(cudaMemcpy(got.data(), ds, got.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    double worst = 0;
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t e = 0; e < c.experts; ++e) {
        double want = 0, mag = 0;
        for (int64_t i = 0; i < c.hidden; ++i) {
          const double p = static_cast<double>(x[static_cast<size_t>(r * c.hidden + i)]) * w[static_cast<size_t>(e * c.hidden + i)];
          want += p;
          mag += std::fabs(p);
        }
        // bf16 output rounding (2^-9 relative) plus f32 summation (hidden * 2^-24 of the magnitudes).
        const double err = std::fabs(bf16_to_f32(got[static_cast<size_t>(r * c.experts + e)]) - want);
        const double bound = std::ldexp(std::fabs(want), -8) + mag * static_cast<double>(c.hidden) * 0x1p-24 + 1e-6;
        worst = std::max(worst, err / bound);
      }
    EXPECT_LE(worst, 1.0) << c.rows << "x" << c.hidden << " experts " << c.experts;
    for (void* p : {dx, dw, ds}) cudaFree(p);
  }
  EXPECT_FALSE(moe_router_scores_cuda(nullptr, nullptr, 1, 100, 8, nullptr, nullptr).is_ok());
}

}  // namespace
}  // namespace dg
#endif
