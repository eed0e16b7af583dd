// The self-conditioning row softmax on the GPU (soft_probs_cuda: slices over blocks, merged per row in slice order)
// against f64 softmax of the same bf16 logits, rounded to bf16 as the CPU reference stores them; with and without
// the sparse cutoff; vocab sizes that are and are not multiples of 8, one slice and many. Four loads in flight
// (CudaKernels::soft_probs_loads) against one: the same bits. Skipped without a GPU.
#include <gtest/gtest.h>

#if defined(DG_WITH_CUDA)
#include <cmath>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "core/cuda/cuda_check.h"
#include "core/dtype.h"
#include "ops/self_cond/self_cond_cuda.h"
#include "support/compare.h"
#include "support/device_buf.h"
#include "support/seeded.h"

namespace dg {
namespace self_cond_cuda_test {

void run_case(int64_t rows, int64_t vocab, float cutoff) {
  const std::vector<uint16_t> x = test::seeded_uniform_bf16(static_cast<size_t>(rows * vocab), 61 + static_cast<uint64_t>(vocab), -4.0f, 4.0f);
  // f64 softmax per row, rounded to bf16; the cutoff zeroes p < cutoff * p_max.
  std::vector<float> want(x.size());
  std::vector<double> floor(static_cast<size_t>(rows));  // the largest probability the cutoff zeroes, per row
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -INFINITY, sum = 0;
    for (int64_t v = 0; v < vocab; ++v) mx = std::max(mx, static_cast<double>(bf16_to_f32(x[static_cast<size_t>(r * vocab + v)])));
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(bf16_to_f32(x[static_cast<size_t>(r * vocab + v)]) - mx);
    floor[static_cast<size_t>(r)] = cutoff / sum;
    for (int64_t v = 0; v < vocab; ++v) {
      const double p = std::exp(bf16_to_f32(x[static_cast<size_t>(r * vocab + v)]) - mx) / sum;
      want[static_cast<size_t>(r * vocab + v)] = p >= cutoff / sum ? round_bf16(static_cast<float>(p)) : 0.0f;
    }
  }
  void *dx = nullptr, *dp = nullptr, *part = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, x.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dp, x.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&part, static_cast<size_t>(2 * rows * soft_probs_slices(rows, vocab)) * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(dp, 0xff, x.size() * 2), cudaSuccess);  // NaN where never written
  const Status s = soft_probs_cuda(dx, rows, vocab, cutoff, dp, part, nullptr);
  ASSERT_TRUE(s.is_ok()) << s.message();
  std::vector<uint16_t> got_bits(x.size());
  ASSERT_EQ(cudaMemcpy(got_bits.data(), dp, x.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(dx);
  cudaFree(dp);
  cudaFree(part);
  std::vector<float> got(x.size());
  for (size_t i = 0; i < got.size(); ++i) got[i] = bf16_to_f32(got_bits[i]);
  // Bound: f32 exp and sums against f64 move p by a few 2^-24 relative, which flips a bf16 rounding (one ulp: 2^-8
  // to 2^-7 relative by where the value sits in its binade) at most (H200, 2026-12-01: 1.94 times a 2^-8 bound,
  // i.e. 0.97 of this one); a probability on the cutoff boundary may be zeroed on one side only, so the bound is
  // the cutoff (cutoff * p_max, 1% over for rounding) where either side is zero, plus one ulp of the value.
  double worst = 0;
  int64_t bad = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool zeroed = want[i] == 0.0f || got[i] == 0.0f;  // a side of the cutoff: the value is below ~floor
    const double tol = std::ldexp(std::fabs(want[i]), -7) +
                       (zeroed ? 1.01 * floor[i / static_cast<size_t>(vocab)] : 0.0) + 1e-30;
    const double e = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(e <= tol) && bad < 0) bad = static_cast<int64_t>(i);
    worst = std::max(worst, e / tol);
  }
  const test::Diff d = test::compare(got, want);
  std::cout << "  soft_probs " << rows << "x" << vocab << " cutoff " << cutoff << ": " << d.str() << "; worst/bound "
            << worst << "\n";
  EXPECT_TRUE(d.finite);
  EXPECT_EQ(bad, -1) << "first element outside the bound: " << bad << " (" << d.str() << ")";
  EXPECT_GE(d.cosine, 0.99999);
}

TEST(SoftProbsCuda, MatchesF64Softmax) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine";
  run_case(3, 7, 0.0f);               // vocab not a multiple of 8: the scalar path, one slice
  run_case(256, 262144, 0.0f);        // the 26B-A4B canvas: many slices per row
  run_case(256, 262144, 4.54e-5f);    // the survivor cutoff e^-10
  run_case(5, 4096, 4.54e-5f);        // dg-tiny's vocab
  run_case(4096, 1000, 0.0f);         // many rows: one slice each
}

// Both outputs (bf16 probabilities; E4M3 codes and row scales) with `loads` 16-byte loads in flight.
struct SoftOut {
  std::vector<uint16_t> probs;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};
SoftOut soft_out(const std::vector<uint16_t>& x, int64_t rows, int64_t vocab, float cutoff, int loads) {
  const size_t n = x.size();
  const test::DeviceBuf dx(x), dp(n * 2), dq(n), ds(static_cast<size_t>(rows) * 4),
      part(static_cast<size_t>(2 * rows * soft_probs_slices(rows, vocab)) * 4);
  Status s = soft_probs_cuda(dx.p, rows, vocab, cutoff, dp.p, part.p, nullptr, loads);
  EXPECT_TRUE(s.is_ok()) << s.message();
  s = soft_probs_fp8_cuda(dx.p, rows, vocab, cutoff, dq.p, ds.as<float>(), part.p, nullptr, loads);
  EXPECT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return {dp.get<uint16_t>(n), dq.get<uint8_t>(n), ds.get<float>(static_cast<size_t>(rows))};
}

TEST(SoftProbsCuda, FourLoadsInFlightGiveTheSameBits) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine";
  struct Case {
    int64_t rows, vocab;
    float cutoff;
  };
  const Case cases[] = {
      {256, 262144, 0.0f},      // the 26B-A4B canvas: slices of many four-load steps
      {3, 262144, 4.54e-5f},    // the survivor cutoff
      {5, 4096, 0.0f},          // dg-tiny's vocab: one step or fewer a thread
      {300, 8200, 0.0f},        // a slice past the last four-load step: the one-load tail
      {3, 1003, 0.0f},          // not a multiple of 8: the scalar loop
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.rows) + " x " + std::to_string(c.vocab));
    const std::vector<uint16_t> x = test::seeded_uniform_bf16(static_cast<size_t>(c.rows * c.vocab),
                                                              97 + static_cast<uint64_t>(c.vocab), -6.0f, 6.0f);
    const SoftOut one = soft_out(x, c.rows, c.vocab, c.cutoff, 1), four = soft_out(x, c.rows, c.vocab, c.cutoff, 4);
    EXPECT_EQ(one.probs, four.probs) << "bf16 probabilities";
    EXPECT_EQ(one.codes, four.codes) << "E4M3 codes";
    EXPECT_EQ(one.scales, four.scales) << "row scales";
    size_t nonzero = 0;
    for (const uint16_t b : one.probs) nonzero += (b & 0x7fff) != 0;
    EXPECT_GT(nonzero, one.probs.size() / 2) << "the comparison must see real probabilities";
  }
}

TEST(SoftProbsCuda, RefusesOtherLoadCounts) {
  const Status s = soft_probs_cuda(nullptr, 1, 8, 0.0f, nullptr, nullptr, nullptr, 2);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("1 or 4"), std::string::npos) << s.message();
}

}  // namespace self_cond_cuda_test
}  // namespace dg
#endif
