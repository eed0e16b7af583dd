// RMSNorm: the CPU reference against a direct f64 formula, and the CUDA kernel against the CPU reference (skipped
// with a message when no GPU is present). Shapes: tiny (1, 7), odd (111, 989), real (256 head rows, 2816).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/rmsnorm/rmsnorm_cuda.h"
#include "support/compare.h"
#include "support/seeded.h"

#if defined(DG_WITH_CUDA)
#include "core/cuda/cuda_check.h"
#endif

namespace dg {
namespace rmsnorm_test {

struct Case {
  int64_t rows, dim;
  bool weighted;
};
const Case kCases[] = {{1, 7, true}, {7, 1, false}, {3, 111, true}, {5, 989, false}, {4, 256, true}, {3, 2816, true}};

TEST(RmsNormCpu, MatchesTheFormula) {
  for (const Case& c : kCases) {
    const auto x = test::seeded_uniform(static_cast<size_t>(c.rows * c.dim), 1, -3.0f, 3.0f);
    const auto wv = test::seeded_uniform(static_cast<size_t>(c.dim), 2, 0.7f, 1.3f);
    const Tensor w = host_view(wv.data(), DType::kF32, Shape{c.dim});
    std::vector<float> y(x.size()), want(x.size());
    rmsnorm_cpu(x.data(), c.rows, c.dim, c.weighted ? &w : nullptr, 1e-6f, y.data());
    for (int64_t r = 0; r < c.rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < c.dim; ++i) ss += static_cast<double>(x[static_cast<size_t>(r * c.dim + i)]) * x[static_cast<size_t>(r * c.dim + i)];
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(c.dim) + 1e-6);
      for (int64_t i = 0; i < c.dim; ++i)
        want[static_cast<size_t>(r * c.dim + i)] = static_cast<float>(
            x[static_cast<size_t>(r * c.dim + i)] * inv * (c.weighted ? wv[static_cast<size_t>(i)] : 1.0f));
    }
    const test::Diff d = test::compare(y, want);
    EXPECT_TRUE(d.finite);
    EXPECT_LE(d.max_rel, 2e-6) << c.rows << "x" << c.dim << " " << d.str();
  }
}

#if defined(DG_WITH_CUDA)
TEST(RmsNormCuda, MatchesTheCpuReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine";
  for (const Case& c : kCases) {
    const size_t n = static_cast<size_t>(c.rows * c.dim);
    const auto x = test::seeded_uniform(n, 3, -3.0f, 3.0f);
    const auto wv = test::seeded_uniform(static_cast<size_t>(c.dim), 4, 0.7f, 1.3f);
    void *dx, *dw, *dy;
    ASSERT_EQ(cudaMalloc(&dx, n * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dw, wv.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dy, n * 4), cudaSuccess);
    cudaMemcpy(dx, x.data(), n * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dw, wv.data(), wv.size() * 4, cudaMemcpyHostToDevice);
    const Status s = rmsnorm_cuda(dx, DType::kF32, c.weighted ? dw : nullptr, DType::kF32, dy, DType::kF32, c.rows,
                                  c.dim, 1e-6f, nullptr);
    ASSERT_TRUE(s.is_ok()) << s.message();
    std::vector<float> got(n), want(n);
    cudaMemcpy(got.data(), dy, n * 4, cudaMemcpyDeviceToHost);
    const Tensor w = host_view(wv.data(), DType::kF32, Shape{c.dim});
    rmsnorm_cpu(x.data(), c.rows, c.dim, c.weighted ? &w : nullptr, 1e-6f, want.data());
    const test::Diff d = test::compare(got, want);
    EXPECT_TRUE(d.finite);
    EXPECT_LE(d.max_rel, 1e-5) << c.rows << "x" << c.dim << " " << d.str();
    cudaFree(dx);
    cudaFree(dw);
    cudaFree(dy);
  }
}
#endif

}  // namespace rmsnorm_test
}  // namespace dg
