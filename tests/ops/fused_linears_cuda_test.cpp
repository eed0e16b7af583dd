// The CUDA backend's fused products against the unfused ones on the same backend: upload() stores q/k/v and
// gate/up side by side, linears() then runs one product and splits it, gated_linear() one product and the gated
// GELU of its halves. Skipped without a GPU.
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
#include "support/compare.h"

namespace dg {
namespace {

std::vector<float> uniform(size_t n, uint64_t seed, float scale) {
  Lcg rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = round_bf16(static_cast<float>((rng.uniform() * 2 - 1) * scale));
  return v;
}

test::Diff diff(Backend& be, const Tensor& a, const Tensor& b) {
  std::vector<float> x(static_cast<size_t>(a.numel())), y(x.size());
  be.copy_to_host(a, x.data());
  be.copy_to_host(b, y.data());
  return test::compare(x, y);
}
double max_abs_diff(Backend& be, const Tensor& a, const Tensor& b) { return diff(be, a, b).max_abs; }

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
    EXPECT_LE(max_abs_diff(*be, *a, *b), 2e-2);
  // k and v alone (the encoder's cache-only pass) are side by side too.
  const Tensor* kv_only[] = {nullptr, &D.k, &D.v};
  Tensor k2 = be->alloc(Shape{rows, Nkv}), v2 = be->alloc(Shape{rows, Nkv});
  Tensor* outs2[] = {&q, &k2, &v2};
  be->linears(x, kv_only, outs2);
  EXPECT_LE(max_abs_diff(*be, k2, k1), 2e-2);
  EXPECT_LE(max_abs_diff(*be, v2, v1), 2e-2);

  Tensor g = be->alloc(Shape{rows, I}), g1 = be->alloc(Shape{rows, I});
  be->gated_linear(x, D.gate, D.up, g);
  be->Backend::gated_linear(x, D.gate, D.up, g1);
  const test::Diff dg = diff(*be, g, g1);
  EXPECT_LE(dg.max_abs, 2e-2);
  EXPECT_TRUE(dg.finite);
  std::vector<float> gv(static_cast<size_t>(g.numel()));
  be->copy_to_host(g, gv.data());
  EXPECT_GT(*std::max_element(gv.begin(), gv.end()), 0.1f);  // not all zero
}

}  // namespace
}  // namespace dg
#endif
