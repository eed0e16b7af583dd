// moe_inputs_fp8_cuda (the W8A8 MoE's router input and z's E4M3 codes in one launch) against the two kernels it
// fuses, moe_router_input_cuda and moe_act_quant_fp8_cuda: the same bytes, on the 26B-A4B shape (256 canvas rows of
// 2,816), a hidden size below a block's first pass (704), one past the fused path's 4,096 (the two calls), an
// all-zero row. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "ops/moe/moe_cuda.h"

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include "core/cuda/cuda_check.h"

namespace dg {
namespace moe_inputs_cuda_test {

struct Dev {
  void* p = nullptr;
  explicit Dev(size_t bytes) { EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess); }
  ~Dev() { cudaFree(p); }
  template <class T>
  std::vector<T> read(size_t n) const {
    std::vector<T> v(n);
    EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
};

std::vector<uint16_t> random_bf16(size_t n, std::mt19937& rng, float amp) {
  std::uniform_real_distribution<float> u(-amp, amp);
  std::vector<uint16_t> v(n);
  for (uint16_t& x : v) x = f32_to_bf16(u(rng));
  return v;
}

void same_as_the_two_kernels(int64_t rows, int64_t hidden, uint32_t seed) {
  SCOPED_TRACE(std::to_string(rows) + " rows of " + std::to_string(hidden));
  std::mt19937 rng(seed);
  const size_t n = static_cast<size_t>(rows * hidden);
  std::vector<uint16_t> h = random_bf16(n, rng, 3.0f), z = random_bf16(n, rng, 40.0f);
  const std::vector<uint16_t> scale = random_bf16(static_cast<size_t>(hidden), rng, 2.0f);
  for (int64_t c = 0; c < hidden; ++c) z[static_cast<size_t>(c)] = 0;  // row 0 of z all zero: scale 0, codes 0
  Dev dh(n * 2), dz(n * 2), ds(static_cast<size_t>(hidden) * 2);
  ASSERT_EQ(cudaMemcpy(dh.p, h.data(), n * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dz.p, z.data(), n * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(ds.p, scale.data(), scale.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  const float eps = 1e-6f, root = 1.0f / std::sqrt(static_cast<float>(hidden));
  Dev r1(n * 2), q1(n), s1(static_cast<size_t>(rows) * 4), r2(n * 2), q2(n), s2(static_cast<size_t>(rows) * 4);
  Status st = moe_router_input_cuda(dh.p, ds.p, r1.p, rows, hidden, eps, root, nullptr);
  ASSERT_TRUE(st.is_ok()) << st.message();
  st = moe_act_quant_fp8_cuda(dz.p, rows, hidden, q1.p, static_cast<float*>(s1.p), nullptr);
  ASSERT_TRUE(st.is_ok()) << st.message();
  st = moe_inputs_fp8_cuda(dh.p, ds.p, r2.p, rows, hidden, eps, root, dz.p, q2.p, static_cast<float*>(s2.p), nullptr);
  ASSERT_TRUE(st.is_ok()) << st.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(r2.read<uint16_t>(n), r1.read<uint16_t>(n)) << "router input";
  EXPECT_EQ(q2.read<uint8_t>(n), q1.read<uint8_t>(n)) << "codes";
  const auto got_s = s2.read<float>(static_cast<size_t>(rows)), want_s = s1.read<float>(static_cast<size_t>(rows));
  EXPECT_EQ(got_s, want_s) << "scales";
  EXPECT_EQ(got_s[0], 0.0f);
}

TEST(MoeInputsCuda, TheFusedLaunchWritesTheTwoKernelsBytes) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  same_as_the_two_kernels(256, 2816, 1);  // a 26B-A4B canvas
  same_as_the_two_kernels(37, 704, 2);    // fewer chunks than threads
  same_as_the_two_kernels(3, 4104, 3);    // past the fused path: the launcher's fallback to the two calls runs
}

}  // namespace moe_inputs_cuda_test
}  // namespace dg
#endif
