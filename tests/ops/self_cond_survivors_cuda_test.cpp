// The survivor self-conditioning on the GPU (soft_survivors_cuda, soft_gather_cuda; CudaKernels::sc_survivors)
// against its CPU twin, soft_embed_cpu over the bf16 table with the same cutoff: peaked logits (a few tokens well
// above the rest, as a trained model's), one slice and many, a vocabulary not a multiple of 8 (the scalar loads);
// the overflow flag where the survivors pass the cap; the same bits on every run (the lists' order varies, the sums'
// does not). Skipped without a GPU.
#include <gtest/gtest.h>

#if defined(DG_WITH_CUDA)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "core/cuda/cuda_check.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "ops/self_cond/self_cond_cuda.h"
#include "support/compare.h"
#include "support/device_buf.h"
#include "support/seeded.h"

namespace dg {
namespace self_cond_survivors_cuda_test {

constexpr float kCutoff = 4.54e-5f;  // e^-10, the contract sampler's

// Logits [rows, vocab] in [-3, 3] with `peaks` tokens a row lifted to 13.5-16 (spread over the row): the cutoff
// (10 below the best) keeps exactly those.
std::vector<uint16_t> peaked_logits(int64_t rows, int64_t vocab, int peaks, uint64_t seed) {
  std::vector<float> x = test::seeded_uniform(static_cast<size_t>(rows * vocab), seed, -3.0f, 3.0f);
  const std::vector<float> lift = test::seeded_uniform(static_cast<size_t>(rows * peaks), seed + 1, 13.5f, 16.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int k = 0; k < peaks; ++k)
      x[static_cast<size_t>(r * vocab + (k * 7919 + r * 131) % vocab)] = lift[static_cast<size_t>(r * peaks + k)];
  std::vector<uint16_t> bits(x.size());
  for (size_t i = 0; i < x.size(); ++i) bits[i] = f32_to_bf16(x[i]);
  return bits;
}

struct Survivors {
  std::vector<uint16_t> out;    // [rows, hidden] bf16 sums (before the embedding scale)
  std::vector<int32_t> count;   // [rows + 1]: the rows' counts, then the overflow flag
};

Survivors run_survivors(const std::vector<uint16_t>& x, int64_t rows, int64_t vocab, const std::vector<uint16_t>& table,
                        int64_t hidden, int cap) {
  const test::DeviceBuf dx(x), dt(table), part(static_cast<size_t>(2 * rows * soft_probs_slices(rows, vocab)) * 4),
      idx(static_cast<size_t>(rows * cap) * 4), p(static_cast<size_t>(rows * cap) * 4),
      count(static_cast<size_t>(rows + 1) * 4), out(static_cast<size_t>(rows * hidden) * 2);
  EXPECT_EQ(cudaMemset(count.p, 0, static_cast<size_t>(rows + 1) * 4), cudaSuccess);
  EXPECT_EQ(cudaMemset(out.p, 0xff, static_cast<size_t>(rows * hidden) * 2), cudaSuccess);  // NaN where unwritten
  Status s = soft_probs_stats_cuda(dx.p, rows, vocab, part.p, nullptr);
  EXPECT_TRUE(s.is_ok()) << s.message();
  s = soft_survivors_cuda(dx.p, rows, vocab, kCutoff, part.p, cap, idx.as<int32_t>(), p.as<float>(),
                          count.as<int32_t>(), nullptr);
  EXPECT_TRUE(s.is_ok()) << s.message();
  s = soft_gather_cuda(idx.as<int32_t>(), p.as<float>(), count.as<int32_t>(), rows, cap, dt.p, hidden, out.p, nullptr);
  EXPECT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return {out.get<uint16_t>(static_cast<size_t>(rows * hidden)), count.get<int32_t>(static_cast<size_t>(rows + 1))};
}

// The twin: soft_embed_cpu over the bf16 table with the cutoff, the embedding scale 1 (bf16 sums).
std::vector<float> twin(const std::vector<uint16_t>& x, int64_t rows, int64_t vocab, const std::vector<uint16_t>& table,
                        int64_t hidden) {
  Tensor t = host_tensor(DType::kBF16, Shape{vocab, hidden});
  std::memcpy(t.data, table.data(), table.size() * 2);
  std::vector<float> out(static_cast<size_t>(rows * hidden));
  soft_embed_cpu(x.data(), DType::kBF16, rows, t, 1.0f, Storage::kBF16, kCutoff, out.data());
  return out;
}

TEST(SoftSurvivorsCuda, MatchTheCpuTwin) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine";
  struct Case {
    int64_t rows, vocab, hidden;
    int peaks, cap;
  };
  const Case cases[] = {
      {256, 262144, 2816, 12, 512},  // the 26B-A4B canvas: many slices a row
      {5, 4096, 128, 3, 64},         // dg-tiny's vocabulary: one slice or few
      {3, 1003, 64, 5, 256},         // not a multiple of 8: the scalar loads
      {4, 512, 8, 1, 1},             // a cap of one (one peak well above the rest)
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.rows) + " x " + std::to_string(c.vocab) + " -> " + std::to_string(c.hidden));
    const std::vector<uint16_t> x = peaked_logits(c.rows, c.vocab, c.peaks, 300 + static_cast<uint64_t>(c.vocab));
    const std::vector<uint16_t> table =
        test::seeded_uniform_bf16(static_cast<size_t>(c.vocab * c.hidden), 41 + static_cast<uint64_t>(c.hidden),
                                  -1.0f, 1.0f);
    const Survivors got = run_survivors(x, c.rows, c.vocab, table, c.hidden, c.cap);
    ASSERT_EQ(got.count[static_cast<size_t>(c.rows)], 0) << "no row may overflow here";
    for (int64_t r = 0; r < c.rows; ++r) EXPECT_EQ(got.count[static_cast<size_t>(r)], c.peaks) << "row " << r;
    const std::vector<float> want = twin(x, c.rows, c.vocab, table, c.hidden);
    std::vector<float> g(got.out.size());
    for (size_t i = 0; i < g.size(); ++i) g[i] = bf16_to_f32(got.out[i]);
    // Bound: the same probabilities (one bf16 ulp where f32 exp rounds differently), the same order, fused
    // multiply-adds against the twin's products and sums: a bf16 ulp of the sum, or 2^-8 of the row's peak.
    double worst = 0;
    int64_t bad = -1;
    for (int64_t r = 0; r < c.rows; ++r) {
      double peak = 0;
      for (int64_t h = 0; h < c.hidden; ++h)
        peak = std::max(peak, std::fabs(double{want[static_cast<size_t>(r * c.hidden + h)]}));
      for (int64_t h = 0; h < c.hidden; ++h) {
        const size_t i = static_cast<size_t>(r * c.hidden + h);
        const double tol = std::ldexp(std::fabs(want[i]), -7) + std::ldexp(peak, -8) + 1e-30;
        const double e = std::fabs(static_cast<double>(g[i]) - want[i]);
        if (!(e <= tol) && bad < 0) bad = static_cast<int64_t>(i);
        worst = std::max(worst, e / tol);
      }
    }
    const test::Diff d = test::compare(g, want);
    std::cout << "  survivors " << c.rows << "x" << c.vocab << "->" << c.hidden << ": " << d.str() << "; worst/bound "
              << worst << "\n";
    EXPECT_TRUE(d.finite);
    EXPECT_EQ(bad, -1) << "first element outside the bound: " << bad << " (" << d.str() << ")";
    EXPECT_GE(d.cosine, 0.99999);
  }
}

TEST(SoftSurvivorsCuda, FlagTheRowsPastTheCap) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine";
  // Logits in [-3, 3] without peaks: every token lies within e^-10 of the best, thousands a row.
  const int64_t rows = 6, vocab = 32768, hidden = 64;
  std::vector<uint16_t> x = test::seeded_uniform_bf16(static_cast<size_t>(rows * vocab), 77, -3.0f, 3.0f);
  for (int64_t v = 0; v < vocab; ++v) x[static_cast<size_t>(2 * vocab + v)] = f32_to_bf16(v == 5 ? 20.0f : 0.0f);
  const std::vector<uint16_t> table = test::seeded_uniform_bf16(static_cast<size_t>(vocab * hidden), 78, -1.0f, 1.0f);
  const Survivors got = run_survivors(x, rows, vocab, table, hidden, 128);
  EXPECT_EQ(got.count[static_cast<size_t>(rows)], 1) << "the overflow flag";
  for (int64_t r = 0; r < rows; ++r) {
    if (r == 2) {
      EXPECT_EQ(got.count[2], 1) << "the one peaked row keeps its one token";
      continue;
    }
    EXPECT_GT(got.count[static_cast<size_t>(r)], 128) << "row " << r;
    EXPECT_TRUE(std::isnan(bf16_to_f32(got.out[static_cast<size_t>(r * hidden)])))
        << "an overflowed row is not written";
  }
  EXPECT_EQ(got.out[static_cast<size_t>(2 * hidden)], table[static_cast<size_t>(5 * hidden)])
      << "p = 1 times the one survivor's row";
}

TEST(SoftSurvivorsCuda, GiveTheSameBitsEveryRun) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine";
  const int64_t rows = 64, vocab = 262144, hidden = 2816;
  const std::vector<uint16_t> x = peaked_logits(rows, vocab, 40, 901);
  const std::vector<uint16_t> table = test::seeded_uniform_bf16(static_cast<size_t>(vocab * hidden), 902, -1.0f, 1.0f);
  const Survivors a = run_survivors(x, rows, vocab, table, hidden, 1024);
  const Survivors b = run_survivors(x, rows, vocab, table, hidden, 1024);
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.out, b.out);
}

TEST(SoftSurvivorsCuda, RefuseBadArguments) {
  EXPECT_FALSE(soft_survivors_cuda(nullptr, 1, 8, 0.0f, nullptr, 8, nullptr, nullptr, nullptr, nullptr).is_ok());
  EXPECT_FALSE(soft_survivors_cuda(nullptr, 1, 8, kCutoff, nullptr, 0, nullptr, nullptr, nullptr, nullptr).is_ok());
  const Status s = soft_gather_cuda(nullptr, nullptr, nullptr, 1, 8, nullptr, 12, nullptr, nullptr);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("multiple of 8"), std::string::npos) << s.message();
}

}  // namespace self_cond_survivors_cuda_test
}  // namespace dg
#endif
