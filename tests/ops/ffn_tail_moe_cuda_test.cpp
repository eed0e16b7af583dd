// ffn_tail_moe_cuda (the feed-forward tail with the MoE's combine inside its kernel) against the two kernels it
// replaces, moe_combine_cuda then ffn_tail_cuda: the same bytes, on the 26B-A4B shape (256 canvas rows of 2,816, top 8
// of 128 experts) and a small one (37 rows of 704, top 2); with the next layer's input norm (NextNormOut) both tails
// write rmsnorm_codes_cuda's bytes of their rows; rows past the vectorised kernel (4,104) are refused by name and
// ffn_tail_moe_fits says so. Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "ops/moe/moe_cuda.h"
#include "ops/residual/residual.h"
#include "ops/rmsnorm/rmsnorm_cuda.h"
#include "support/seeded.h"

#if defined(DG_WITH_CUDA)
#include "core/cuda/cuda_check.h"
#include "support/device_buf.h"

namespace dg {
namespace ffn_tail_moe_cuda_test {

using test::DeviceBuf;
using test::seeded_uniform;
using test::seeded_uniform_bf16;

void same_as_combine_then_tail(int64_t rows, int64_t dim, int top_k, uint64_t seed) {
  SCOPED_TRACE(std::to_string(rows) + " rows of " + std::to_string(dim) + ", top " + std::to_string(top_k));
  std::mt19937 rng(static_cast<uint32_t>(seed));
  const int64_t pairs = rows * top_k;
  const size_t n = static_cast<size_t>(rows * dim), d = static_cast<size_t>(dim);
  std::vector<int32_t> inv(static_cast<size_t>(pairs));
  std::iota(inv.begin(), inv.end(), 0);
  std::shuffle(inv.begin(), inv.end(), rng);  // the pairs' rows in expert order, as the grouping leaves them
  const DeviceBuf y(seeded_uniform_bf16(static_cast<size_t>((pairs + 16) * dim), seed, -4.0f, 4.0f)),
      h1(seeded_uniform_bf16(n, seed + 1, -2.0f, 2.0f)), m1(seeded_uniform_bf16(n, seed + 2, -3.0f, 3.0f)),
      w1(seeded_uniform_bf16(d, seed + 3, -1.5f, 1.5f)), w2(seeded_uniform_bf16(d, seed + 4, -1.5f, 1.5f)),
      w(seeded_uniform_bf16(d, seed + 5, -1.5f, 1.5f)), dinv(inv),
      dweight(seeded_uniform(static_cast<size_t>(pairs), seed + 6, 0.0f, 0.5f)), m2(n * 2), want(n * 2), got(n * 2);
  const float eps = 1e-6f, scalar = 0.75f;
  ASSERT_TRUE(ffn_tail_moe_fits(dim, h1.p, m1.p, w1.p, y.p, w2.p, w.p, got.p));
  Status st = moe_combine_cuda(y.p, dinv.as<int32_t>(), dweight.as<float>(), rows, top_k, dim, m2.p, nullptr);
  ASSERT_TRUE(st.is_ok()) << st.message();
  st = ffn_tail_cuda(h1.p, m1.p, w1.p, m2.p, w2.p, w.p, scalar, want.p, rows, dim, eps, nullptr);
  ASSERT_TRUE(st.is_ok()) << st.message();
  st = ffn_tail_moe_cuda(h1.p, m1.p, w1.p, y.p, dinv.as<int32_t>(), dweight.as<float>(), top_k, w2.p, w.p, scalar,
                         got.p, rows, dim, eps, nullptr);
  ASSERT_TRUE(st.is_ok()) << st.message();
  const std::vector<uint16_t> a = want.get<uint16_t>(n), b = got.get<uint16_t>(n);
  EXPECT_EQ(b, a);
  EXPECT_NE(std::count(a.begin(), a.end(), uint16_t{0}), static_cast<std::ptrdiff_t>(n)) << "the tail wrote zeros";

  // The next layer's input norm and its codes from the same launch, both tail kernels: rmsnorm_codes_cuda's bytes
  // of the stored rows (for 2,816 its block order, for 704 the warp's).
  const DeviceBuf wn(seeded_uniform_bf16(d, seed + 7, -1.5f, 1.5f)), ny_want(n * 2), nq_want(n), ns_want(n * 4),
      ny(n * 2), nq(n), ns(n * 4), out2(n * 2);
  st = rmsnorm_codes_cuda(want.p, wn.p, ny_want.p, rows, dim, eps, nq_want.p, ns_want.as<float>(), nullptr);
  ASSERT_TRUE(st.is_ok()) << st.message();
  const NextNormOut next{wn.p, ny.p, RowCodesOut{nq.p, ns.as<float>()}};
  ASSERT_TRUE(next_norm_fits(dim, next));
  for (int fused = 0; fused < 2; ++fused) {
    SCOPED_TRACE(fused ? "ffn_tail_moe_cuda" : "ffn_tail_cuda");
    st = fused ? ffn_tail_moe_cuda(h1.p, m1.p, w1.p, y.p, dinv.as<int32_t>(), dweight.as<float>(), top_k, w2.p, w.p,
                                   scalar, out2.p, rows, dim, eps, nullptr, {}, next)
               : ffn_tail_cuda(h1.p, m1.p, w1.p, m2.p, w2.p, w.p, scalar, out2.p, rows, dim, eps, nullptr, {}, next);
    ASSERT_TRUE(st.is_ok()) << st.message();
    EXPECT_EQ(out2.get<uint16_t>(n), a);
    EXPECT_EQ(ny.get<uint16_t>(n), ny_want.get<uint16_t>(n));
    EXPECT_EQ(nq.get<uint8_t>(n), nq_want.get<uint8_t>(n));
    EXPECT_EQ(ns.get<float>(static_cast<size_t>(rows)), ns_want.get<float>(static_cast<size_t>(rows)));
    ASSERT_EQ(cudaMemset(ny.p, 0, n * 2), cudaSuccess);  // the next round writes them again
    ASSERT_EQ(cudaMemset(nq.p, 0, n), cudaSuccess);
  }
}

TEST(FfnTailMoeCuda, TheFusedCombineWritesTheTwoKernelsBytes) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  same_as_combine_then_tail(256, 2816, 8, 1);  // a 26B-A4B canvas
  same_as_combine_then_tail(37, 704, 2, 2);
}

TEST(FfnTailMoeCuda, RowsPastTheVectorisedKernelAreRefused) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const DeviceBuf buf(size_t{3} * 4104 * 2 * 4);
  EXPECT_FALSE(ffn_tail_moe_fits(4104, buf.p, buf.p, buf.p, buf.p, buf.p, buf.p, buf.p));
  const Status st = ffn_tail_moe_cuda(buf.p, buf.p, buf.p, buf.p, nullptr, nullptr, 2, buf.p, buf.p, 1.0f, buf.p, 3,
                                      4104, 1e-6f, nullptr);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("4104"), std::string::npos) << st.message();
}

}  // namespace ffn_tail_moe_cuda_test
}  // namespace dg
#endif
