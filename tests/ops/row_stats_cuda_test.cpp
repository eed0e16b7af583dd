// The CUDA row statistics (rows split into slices over several blocks, merged in a fixed order) against
// row_stats_cpu: argmax exactly, including ties placed across slices; entropy and p_max to f64-sum rounding; the
// tempered bf16 logits bit for bit; and the same bits on a second run. Skipped without a GPU.
#include <gtest/gtest.h>

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "core/dtype.h"
#include "diffusion/rng.h"
#include "ops/row_stats/row_stats.h"

namespace dg {
namespace {

struct Case {
  const char* name;
  int64_t rows, vocab;
};
// One block per row (small vocabularies, odd sizes take the scalar path), and the real vocabulary at one canvas
// (several slices per row) and at 32 canvases' worth of rows cut short (one slice).
const Case kCases[] = {{"tiny odd", 3, 37},        {"small", 17, 4096},      {"odd vocab", 5, 70001},
                       {"one canvas", 256, 262144}, {"many rows", 2048, 8192}};

TEST(RowStatsCuda, MatchesTheCpuReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine";
  const float T = 0.8f;
  for (const Case& c : kCases) {
    const size_t n = static_cast<size_t>(c.rows * c.vocab);
    Lcg rng(static_cast<uint64_t>(c.vocab + c.rows));
    std::vector<float> raw(n);
    for (float& x : raw) x = static_cast<float>(rng.uniform() * 24.0 - 12.0);
    for (int64_t r = 0; r < c.rows; ++r) {  // ties for the max: the lowest index must win, across slices too
      float* row = raw.data() + r * c.vocab;
      const int64_t a = (r * 7919) % c.vocab, b = c.vocab - 1 - (r * 104729) % c.vocab;
      row[a] = row[b] = 30.0f;
      if (r % 3 == 0) row[c.vocab / 2] = 30.0f;
    }
    std::vector<float> tempered(n);
    std::vector<RowStats> want(static_cast<size_t>(c.rows));
    row_stats_cpu(raw.data(), c.rows, c.vocab, T, tempered.data(), want.data());

    float* draw = nullptr;
    void* dtemp = nullptr;
    RowStats* dstats = nullptr;
    ASSERT_EQ(cudaMalloc(&draw, n * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dtemp, n * 2), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dstats, want.size() * sizeof(RowStats)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(draw, raw.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
    std::vector<RowStats> got[2] = {std::vector<RowStats>(want.size()), std::vector<RowStats>(want.size())};
    std::vector<uint16_t> temp_bits(n);
    for (auto& g : got) {
      const Status s = row_stats_cuda(draw, c.rows, c.vocab, T, dtemp, dstats, nullptr);
      ASSERT_TRUE(s.is_ok()) << c.name << ": " << s.message();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << c.name;
      ASSERT_EQ(cudaMemcpy(g.data(), dstats, g.size() * sizeof(RowStats), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    ASSERT_EQ(cudaMemcpy(temp_bits.data(), dtemp, n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    double worst_h = 0, worst_p = 0;
    for (size_t r = 0; r < want.size(); ++r) {
      ASSERT_EQ(got[0][r].argmax, want[r].argmax) << c.name << " row " << r;
      worst_h = std::max(worst_h, std::fabs(static_cast<double>(got[0][r].entropy) - want[r].entropy));
      worst_p = std::max(worst_p, std::fabs(static_cast<double>(got[0][r].p_max) - want[r].p_max) /
                                      std::max(1e-30, static_cast<double>(want[r].p_max)));
      EXPECT_EQ(got[0][r].entropy, got[1][r].entropy) << c.name << ": not deterministic, row " << r;
      EXPECT_EQ(got[0][r].p_max, got[1][r].p_max) << c.name << ": not deterministic, row " << r;
    }
    // f64 sums of up to 262,144 terms in another order, rounded to f32: a few f32 ulps.
    EXPECT_LE(worst_h, 1e-5) << c.name;
    EXPECT_LE(worst_p, 1e-5) << c.name;
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) bad += temp_bits[i] != f32_to_bf16(tempered[i]);
    EXPECT_EQ(bad, 0u) << c.name << ": tempered logits differ from bf16(raw / T)";
    std::printf("  %-11s %5lld x %6lld: worst |entropy diff| %.2e, worst p_max rel %.2e\n", c.name,
                static_cast<long long>(c.rows), static_cast<long long>(c.vocab), worst_h, worst_p);
    cudaFree(draw);
    cudaFree(dtemp);
    cudaFree(dstats);
  }
}

}  // namespace
}  // namespace dg
#endif
