// moe_inputs_fp8_cuda (the W8A8 MoE's router input and z's E4M3 codes in one launch) against the two kernels it
// fuses, moe_router_input_cuda and moe_act_quant_fp8_cuda: the same bytes, on the 26B-A4B shape (256 canvas rows of
// 2,816), a hidden size below a block's first pass (704), one past the fused path's 4,096 (the two calls), an
// all-zero row. And the same inputs from the residual chain that makes h1 and z (residual_norms_cuda with
// MoeInputsOut): z's codes the same bytes, h1 and the normed rows unchanged, the router input within one bf16 step of
// moe_router_input_cuda's on the stored h1 (the two kernels' sums of squares in other orders). Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "ops/moe/moe_cuda.h"
#include "ops/residual/residual.h"
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

// residual_norms_cuda's MoeInputsOut against the chain without it, then the two kernels on its stored h1 and z.
void from_the_chain(int64_t rows, int64_t dim, uint64_t seed) {
  SCOPED_TRACE(std::to_string(rows) + " rows of " + std::to_string(dim));
  const size_t n = static_cast<size_t>(rows * dim), d = static_cast<size_t>(dim), sb = static_cast<size_t>(rows) * 4;
  const DeviceBuf h(seeded_uniform_bf16(n, seed, -3.0f, 3.0f)), attn(seeded_uniform_bf16(n, seed + 1, -9.0f, 9.0f));
  const DeviceBuf w_post(seeded_uniform_bf16(d, seed + 2, 0.5f, 1.5f));
  const DeviceBuf w0(seeded_uniform_bf16(d, seed + 3, 0.5f, 2.0f));
  const DeviceBuf w1(seeded_uniform_bf16(d, seed + 4, 0.5f, 2.0f)), rs(seeded_uniform_bf16(d, seed + 5, -2.0f, 2.0f));
  const float eps = 1e-6f, root = 1.0f / std::sqrt(static_cast<float>(dim));
  const DeviceBuf h1a(n * 2), ua(n * 2), za(n * 2), h1b(n * 2), ub(n * 2), zb(n * 2);
  const DeviceBuf r(n * 2), zq(n), zs(sb), r_ref(n * 2), zq_ref(n), zs_ref(sb);
  const void* ws[2] = {w0.p, w1.p};
  void* outs_a[2] = {ua.p, za.p};
  void* outs_b[2] = {ub.p, zb.p};
  Status st = residual_norms_cuda(h.p, attn.p, w_post.p, h1a.p, ws, outs_a, 2, rows, dim, eps, nullptr);
  ASSERT_TRUE(st.is_ok()) << st.message();
  st = residual_norms_cuda(h.p, attn.p, w_post.p, h1b.p, ws, outs_b, 2, rows, dim, eps, nullptr, {}, {},
                           MoeInputsOut{rs.p, root, r.p, RowCodesOut{zq.p, zs.as<float>()}});
  ASSERT_TRUE(st.is_ok()) << st.message();
  st = moe_inputs_fp8_cuda(h1a.p, rs.p, r_ref.p, rows, dim, eps, root, za.p, zq_ref.p, zs_ref.as<float>(), nullptr);
  ASSERT_TRUE(st.is_ok()) << st.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(h1b.get<uint16_t>(n), h1a.get<uint16_t>(n)) << "h1";
  EXPECT_EQ(ub.get<uint16_t>(n), ua.get<uint16_t>(n)) << "out[0]";
  EXPECT_EQ(zb.get<uint16_t>(n), za.get<uint16_t>(n)) << "z";
  EXPECT_EQ(zq.get<uint8_t>(n), zq_ref.get<uint8_t>(n)) << "z's codes";
  EXPECT_EQ(zs.get<float>(static_cast<size_t>(rows)), zs_ref.get<float>(static_cast<size_t>(rows))) << "z's scales";
  const auto got = r.get<uint16_t>(n), want = r_ref.get<uint16_t>(n);
  size_t apart = 0;
  for (size_t i = 0; i < n; ++i) {
    if (got[i] == want[i]) continue;
    ++apart;
    const float a = bf16_to_f32(got[i]), b = bf16_to_f32(want[i]);
    const float step = std::ldexp(1.0f, std::ilogb(std::fmax(std::fabs(a), std::fabs(b))) - 7);
    ASSERT_LE(std::fabs(a - b), step) << "router input " << i << ": " << a << " against " << b;
  }
  std::printf("  %lld x %lld: router input apart by a bf16 step in %zu of %zu\n", static_cast<long long>(rows),
              static_cast<long long>(dim), apart, n);
}

TEST(MoeInputsCuda, FromTheResidualChain) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  from_the_chain(256, 2816, 11);  // a 26B-A4B canvas
  from_the_chain(5, 128, 12);     // dg-tiny's hidden size
}

// Rows the chain's vectorised kernel does not hold (past 4,096 elements) refuse the MoE's inputs with a message.
TEST(MoeInputsCuda, TheChainRefusesRowsItDoesNotHold) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t rows = 2, dim = 4104;
  const size_t n = static_cast<size_t>(rows * dim), d = static_cast<size_t>(dim);
  const DeviceBuf h(n * 2), attn(n * 2), w(d * 2), h1(n * 2), u(n * 2), z(n * 2), r(n * 2), zq(n), zs(8);
  const void* ws[2] = {w.p, w.p};
  void* outs[2] = {u.p, z.p};
  const Status st = residual_norms_cuda(h.p, attn.p, w.p, h1.p, ws, outs, 2, rows, dim, 1e-6f, nullptr, {}, {},
                                        MoeInputsOut{w.p, 0.1f, r.p, RowCodesOut{zq.p, zs.as<float>()}});
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("the MoE's inputs need"), std::string::npos) << st.message();
}

}  // namespace moe_inputs_cuda_test
}  // namespace dg
#endif
