// moe_inputs_fp8_cuda (the W8A8 MoE's router input and z's E4M3 codes in one launch) against the two kernels it
// fuses, moe_router_input_cuda and moe_act_quant_fp8_cuda: the same bytes, on the 26B-A4B shape (256 canvas rows of
// 2,816), a hidden size below a block's first pass (704), one past the fused path's 4,096 (the two calls), an
// all-zero row. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/moe/moe_cuda.h"
#include "support/seeded.h"

#if defined(DG_WITH_CUDA)
#include "core/cuda/cuda_check.h"
#include "support/device_buf.h"

namespace dg {
namespace moe_inputs_cuda_test {

using test::DeviceBuf;
using test::seeded_uniform_bf16;

void same_as_the_two_kernels(int64_t rows, int64_t hidden, uint64_t seed) {
  SCOPED_TRACE(std::to_string(rows) + " rows of " + std::to_string(hidden));
  const size_t n = static_cast<size_t>(rows * hidden);
  std::vector<uint16_t> z = seeded_uniform_bf16(n, seed + 1, -40.0f, 40.0f);
  for (int64_t c = 0; c < hidden; ++c) z[static_cast<size_t>(c)] = 0;  // row 0 of z all zero: scale 0, codes 0
  const DeviceBuf dh(seeded_uniform_bf16(n, seed, -3.0f, 3.0f)), dz(z),
      ds(seeded_uniform_bf16(static_cast<size_t>(hidden), seed + 2, -2.0f, 2.0f));
  const float eps = 1e-6f, root = 1.0f / std::sqrt(static_cast<float>(hidden));
  const size_t sb = static_cast<size_t>(rows) * 4;
  const DeviceBuf r1(n * 2), q1(n), s1(sb), r2(n * 2), q2(n), s2(sb);
  Status st = moe_router_input_cuda(dh.p, ds.p, r1.p, rows, hidden, eps, root, nullptr);
  ASSERT_TRUE(st.is_ok()) << st.message();
  st = moe_act_quant_fp8_cuda(dz.p, rows, hidden, q1.p, s1.as<float>(), nullptr);
  ASSERT_TRUE(st.is_ok()) << st.message();
  st = moe_inputs_fp8_cuda(dh.p, ds.p, r2.p, rows, hidden, eps, root, dz.p, q2.p, s2.as<float>(), nullptr);
  ASSERT_TRUE(st.is_ok()) << st.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(r2.get<uint16_t>(n), r1.get<uint16_t>(n)) << "router input";
  EXPECT_EQ(q2.get<uint8_t>(n), q1.get<uint8_t>(n)) << "codes";
  const auto got_s = s2.get<float>(static_cast<size_t>(rows));
  EXPECT_EQ(got_s, s1.get<float>(static_cast<size_t>(rows))) << "scales";
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
