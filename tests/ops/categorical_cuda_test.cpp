// categorical_cuda at the edges of the CDF against its CPU twin categorical_draw (src/ops/row_stats/row_stats.h):
// rows whose tail has no mass (logits of -1e30 after a spike at 30 that holds nearly all of it), uniforms of 0, 0.5
// and the largest double below 1, over one slice (37 entries), several with a partial last one (70,001) and the
// 26B-A4B vocabulary (64 slices). A uniform past the rounded total must take the CPU's fallback, the last index with
// p > 0, which here is the spike whichever side of the total the rounding falls, so the draws are bit-exact.
// (OpConformance covers uniforms drawn at random.) Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/row_stats/row_stats_cuda.h"

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include "core/cuda/cuda_check.h"

namespace dg {
namespace categorical_cuda_test {

void edges_match_twin(int64_t vocab, uint32_t seed) {
  SCOPED_TRACE("vocab " + std::to_string(vocab));
  constexpr float kT = 0.8f;
  const double below_one = std::nextafter(1.0, 0.0);
  const std::vector<double> u = {below_one, 0.0, 0.5, below_one, below_one, 0.25};
  const auto rows = static_cast<int64_t>(u.size());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> logit(-12.0f, 12.0f);
  std::vector<float> x(static_cast<size_t>(rows * vocab));
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x.data() + r * vocab;
    for (int64_t v = 0; v < vocab; ++v) row[v] = logit(rng);
    // The spike: in the last slice for rows 0-3, at the row's start for row 4 (a last slice without mass), and
    // alone in row 5 (every other entry -1e30).
    const int64_t spike = r == 4 ? 0 : std::max<int64_t>(0, vocab - 1 - 97 * r);
    row[spike] = 30.0f;
    for (int64_t v = spike + 1; v < vocab; ++v) row[v] = -1e30f;
    if (r == 5)
      for (int64_t v = 0; v < spike; ++v) row[v] = -1e30f;
  }
  float* dx = nullptr;
  double* du = nullptr;
  int32_t* dids = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, x.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&du, u.size() * sizeof(double)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dids, u.size() * sizeof(int32_t)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(du, u.data(), u.size() * sizeof(double), cudaMemcpyHostToDevice), cudaSuccess);
  const Status st = categorical_cuda(dx, rows, vocab, kT, du, dids, nullptr);
  ASSERT_TRUE(st.is_ok()) << st.message();
  std::vector<int32_t> got(u.size());
  ASSERT_EQ(cudaMemcpy(got.data(), dids, got.size() * sizeof(int32_t), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(dx);
  cudaFree(du);
  cudaFree(dids);
  std::vector<float> tempered(static_cast<size_t>(vocab));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t v = 0; v < vocab; ++v) tempered[static_cast<size_t>(v)] = x[static_cast<size_t>(r * vocab + v)] / kT;
    EXPECT_EQ(got[static_cast<size_t>(r)], categorical_draw(tempered.data(), vocab, u[static_cast<size_t>(r)]))
        << "row " << r << ", u " << u[static_cast<size_t>(r)];
  }
}

TEST(CategoricalCuda, TheCdfsEdgesDrawAsTheTwin) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  edges_match_twin(37, 1);
  edges_match_twin(70001, 2);
  edges_match_twin(262144, 3);
}

}  // namespace categorical_cuda_test
}  // namespace dg
#endif
