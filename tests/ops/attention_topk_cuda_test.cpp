// The selection kernel of top-k attention (attention_topk_select_cuda) against the CPU reference
// (attention_topk_cpu) on scores both sides hold exactly: each query is one-hot, so a score is one key element and
// the kernel receives the very f32 scores the reference ranks. The kept sets must then be the same, ties included
// (coarse score grids put many equal scores at the k-th place), so the outputs differ only by the f32 softmax sum
// order and the bf16 output rounding. Invisible scores are NaN: reading one would rank it first and show.
// Skipped with a message when no GPU is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "ops/attention/attention_topk_cuda.h"
#include "ops/linear/linear.h"
#include "support/compare.h"
#include "support/seeded.h"

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include "core/cuda/cuda_check.h"

namespace dg {
namespace attention_topk_cuda_test {

struct Case {
  const char* name;
  int64_t heads, kv_heads, dim, rows, S, q_pos0;  // keys at positions 0..S-1, queries at q_pos0 + r
  bool causal;
  int64_t window;
  AttnTopk topk;
  int levels;  // > 0: scores on a grid of this many levels in [-1, 1] (ties); 0: bf16 values in [-4, 4]
};

constexpr AttnTopk kDyn{AttnTopk::Mode::kDyn, 0};
constexpr AttnTopk fixed(int64_t k) { return {AttnTopk::Mode::kFixed, k}; }

const Case kCases[] = {
    {"canvas, 5 score levels, k 64", 4, 2, 64, 16, 1000, 1000, false, 0, fixed(64), 5},
    {"prefill past 8,192 keys, distinct scores, dyn", 2, 1, 128, 300, 8500, 8200, true, 0, kDyn, 0},
    {"full-layer shape canvas, 64 levels, dyn", 16, 2, 512, 32, 12000, 12000, false, 0, kDyn, 64},
    {"causal window 10, k 4", 2, 2, 32, 50, 50, 0, true, 10, fixed(4), 9},
    {"k above the visible keys", 4, 1, 16, 8, 100, 100, false, 0, fixed(4096), 0},
    {"k 1", 2, 1, 16, 20, 300, 300, false, 0, fixed(1), 0},
};

template <typename T>
T* upload(const std::vector<T>& v) {
  T* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(v.size(), 1) * sizeof(T)), cudaSuccess);
  cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  return p;
}

TEST(AttentionTopkCuda, SelectionMatchesTheCpuReferenceOnExactScores) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine";
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const int64_t row = c.kv_heads * c.dim, group = c.heads / c.kv_heads;
    std::vector<float> k = test::seeded_uniform(static_cast<size_t>(c.S * row), 31, -1.0f, 1.0f);
    if (c.levels > 0) {
      for (float& x : k) x = std::round((x + 1.0f) * 0.5f * static_cast<float>(c.levels - 1)) /
                              static_cast<float>(c.levels - 1) * 2.0f - 1.0f;
    } else {
      for (float& x : k) x = 4.0f * x;
    }
    for (float& x : k) x = round_bf16(x);
    const std::vector<float> v = test::seeded_uniform(static_cast<size_t>(c.S * row), 32, -1.0f, 1.0f,
                                                      Storage::kBF16);
    // Query (r, h) is one-hot at dimension (7 h + r) % D: its score with key j is that element of key j.
    std::vector<float> q(static_cast<size_t>(c.rows * c.heads * c.dim), 0.0f);
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t h = 0; h < c.heads; ++h) q[static_cast<size_t>((r * c.heads + h) * c.dim + (7 * h + r) % c.dim)] = 1;

    std::vector<float> want(q.size());
    const AttnShape sh{c.heads, c.kv_heads, c.dim};
    attention_topk_cpu(q.data(), c.rows, c.q_pos0, {k.data(), v.data(), 0, c.S}, {nullptr, nullptr, c.S, 0}, sh,
                       c.causal, c.window, c.topk, Storage::kF32, want.data());

    std::vector<float> scores(static_cast<size_t>(c.heads * c.rows * c.S), std::numeric_limits<float>::quiet_NaN());
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t r = 0; r < c.rows; ++r)
        for (int64_t j = 0; j < c.S; ++j) {
          const int64_t qp = c.q_pos0 + r;
          if (c.causal && (j > qp || (c.window > 0 && j <= qp - c.window))) continue;
          scores[static_cast<size_t>((h * c.rows + r) * c.S + j)] =
              dot_f32(q.data() + (r * c.heads + h) * c.dim, k.data() + (j * c.kv_heads + h / group) * c.dim, c.dim);
        }
    std::vector<uint16_t> v16(v.size());
    for (size_t i = 0; i < v.size(); ++i) v16[i] = f32_to_bf16(v[i]);
    float* d_scores = upload(scores);
    uint16_t* d_v = upload(v16);
    uint16_t* d_out = upload(std::vector<uint16_t>(want.size(), 0xffff));
    const Status st = attention_topk_select_cuda(d_scores, d_v, c.heads, c.rows, c.S, c.kv_heads, c.dim, c.q_pos0, 0,
                                                 c.causal, c.window, c.topk, d_out, nullptr);
    ASSERT_TRUE(st.is_ok()) << st.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint16_t> out16(want.size());
    cudaMemcpy(out16.data(), d_out, out16.size() * 2, cudaMemcpyDeviceToHost);
    cudaFree(d_scores);
    cudaFree(d_v);
    cudaFree(d_out);

    std::vector<float> got(out16.size());
    for (size_t i = 0; i < got.size(); ++i) got[i] = bf16_to_f32(out16[i]);
    const test::Diff d = test::compare(got, want);
    EXPECT_TRUE(d.finite) << d.str();
    int64_t bad = -1;
    for (size_t i = 0; i < got.size() && bad < 0; ++i)
      if (std::fabs(got[i] - want[i]) > 0x1p-8f * std::fabs(want[i]) + 1e-5f) bad = static_cast<int64_t>(i);
    EXPECT_EQ(bad, -1) << "first element outside bf16 rounding: " << bad << " " << d.str();
    std::printf("  %-48s max|d| %.2e cos %.7f\n", c.name, d.max_abs, d.cosine);
  }
}

TEST(AttentionTopkCuda, TheLauncherRefusesWhatTheKernelCannotHold) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine";
  const auto call = [](AttnTopk t, int64_t dim) {
    return attention_topk_select_cuda(nullptr, nullptr, 2, 1, 4, 1, dim, 0, 0, false, 0, t, nullptr, nullptr);
  };
  EXPECT_FALSE(call(AttnTopk{}, 64).is_ok()) << "top-k off";
  EXPECT_FALSE(call(fixed(kAttnTopkMax + 1), 64).is_ok());
  EXPECT_FALSE(call(kDyn, 2048).is_ok()) << "head dim above 1024";
}

}  // namespace attention_topk_cuda_test
}  // namespace dg
#endif
