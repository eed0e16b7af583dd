// row_stats_open_cuda (src/ops/row_stats/row_stats.cu, the lm_head's softcap taken by the row statistics) against
// what it replaces: the softcap pass (softcap_cuda, or softcap_scaled_cuda for a W8A8 product's raw sums) followed
// by row_stats_cuda, on the same device: statistics, tempered logits and (with finish) the finished logits bit for
// bit; without finish the sums stay as they were. Shapes: one slice a row and many (a wave's worth), the vectorised
// loop's tail (a slice not a multiple of its two-load step), an odd vocabulary (the scalar loop), no cap; in both
// summation forms (RowStatsForm). The grouped form against the entry-by-entry one and the CPU twin: argmax and
// tempered logits equal, entropy and p_max within 1e-6. The refusals need no GPU.
#include <gtest/gtest.h>

#include "ops/row_stats/row_stats_cuda.h"

#if defined(DG_WITH_CUDA)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "ops/logits/logits_cuda.h"
#include "support/device_buf.h"

namespace dg::test {
namespace row_stats_open_cuda_test {

struct Case {
  int64_t rows, vocab;
  bool scaled;
  float cap;
};

void run_case(const Case& c, bool finish, RowStatsForm form) {
  SCOPED_TRACE(std::to_string(c.rows) + " x " + std::to_string(c.vocab) + (c.scaled ? ", scaled" : "") +
               ", cap " + std::to_string(c.cap) + (finish ? ", finish" : "") +
               (form == RowStatsForm::kGroups ? ", groups" : ""));
  constexpr float kT = 0.7f;
  const size_t n = static_cast<size_t>(c.rows * c.vocab);
  std::mt19937 rng(static_cast<uint32_t>(c.rows * 131 + c.vocab));
  // Scaled: raw e4m3 sums in the thousands times scales near 1 and 0.03 (logits up to about 100, past the cap).
  std::uniform_real_distribution<float> raw_d(c.scaled ? -3000.0f : -90.0f, c.scaled ? 3000.0f : 90.0f);
  std::uniform_real_distribution<float> rs_d(0.5f, 1.5f), cs_d(0.005f, 0.05f);
  std::vector<float> raw(n), rs(static_cast<size_t>(c.rows)), cs(static_cast<size_t>(c.vocab));
  for (float& v : raw) v = raw_d(rng);
  for (float& v : rs) v = rs_d(rng);
  for (float& v : cs) v = cs_d(rng);
  if (c.cap > 0.0f) {  // the cap must bend most logits for the comparison to mean something
    size_t bent = 0;
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t v = 0; v < c.vocab; ++v) {
        const float x = raw[static_cast<size_t>(r * c.vocab + v)];
        const float l = c.scaled ? x * rs[static_cast<size_t>(r)] * cs[static_cast<size_t>(v)] : x;
        bent += std::fabs(l) > 0.5f * c.cap;
      }
    ASSERT_GT(bent, n / 2);
  }
  const DeviceBuf plain(raw), open(raw), drs(rs), dcs(cs);
  const DeviceBuf tp(n * 2), to(n * 2), sp(static_cast<size_t>(c.rows) * sizeof(RowStats)),
      so(static_cast<size_t>(c.rows) * sizeof(RowStats));
  Status s = c.scaled ? softcap_scaled_cuda(plain.as<float>(), c.rows, c.vocab, drs.as<float>(), dcs.as<float>(),
                                            c.cap, nullptr)
                      : softcap_cuda(plain.as<float>(), static_cast<int64_t>(n), c.cap, nullptr);
  ASSERT_TRUE(s.is_ok()) << s.message();
  s = row_stats_cuda(plain.as<float>(), c.rows, c.vocab, kT, tp.p, sp.as<RowStats>(), nullptr, form);
  ASSERT_TRUE(s.is_ok()) << s.message();
  const OpenLogitsIn in{c.scaled ? drs.as<float>() : nullptr, c.scaled ? dcs.as<float>() : nullptr, c.cap, finish};
  s = row_stats_open_cuda(open.as<float>(), c.rows, c.vocab, in, kT, to.p, so.as<RowStats>(), nullptr, form);
  ASSERT_TRUE(s.is_ok()) << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto rows = static_cast<size_t>(c.rows);
  const auto stats_p = sp.get<RowStats>(rows), stats_o = so.get<RowStats>(rows);
  for (size_t r = 0; r < rows; ++r) {
    const RowStats &a = stats_p[r], &b = stats_o[r];
    EXPECT_EQ(a.argmax, b.argmax) << "row " << r;
    EXPECT_EQ(std::memcmp(&a.entropy, &b.entropy, sizeof a.entropy), 0) << "row " << r << ": " << a.entropy << ", "
                                                                          << b.entropy;
    EXPECT_EQ(std::memcmp(&a.p_max, &b.p_max, sizeof a.p_max), 0) << "row " << r << ": " << a.p_max << ", " << b.p_max;
  }
  EXPECT_EQ(tp.get<uint16_t>(n), to.get<uint16_t>(n)) << "tempered logits";
  const auto finished = plain.get<float>(n), after = open.get<float>(n);
  if (finish) {
    EXPECT_EQ(std::memcmp(finished.data(), after.data(), n * sizeof(float)), 0) << "finished logits";
  } else {
    EXPECT_EQ(after, raw) << "the sums must stay as they were without finish";
  }
}

TEST(RowStatsOpenCuda, MatchesTheSoftcapPassThenRowStatsBitForBit) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Case cases[] = {
      {3, 262144, true, 30.0f},   // the 26B-A4B vocabulary, many slices a row
      {3, 262144, false, 30.0f},  //
      {256, 8192, true, 30.0f},   // one canvas of rows: few slices a row
      {300, 4100, false, 30.0f},  // one slice of 4,100: the vectorised loop's single-load tail
      {5, 1003, false, 30.0f},    // odd vocabulary: the scalar loop
      {4, 4096, true, 0.0f},      // no cap: only the bf16 rounding
  };
  for (const Case& c : cases)
    for (const bool finish : {false, true})
      for (const RowStatsForm form : {RowStatsForm::kEach, RowStatsForm::kGroups}) run_case(c, finish, form);
}

// Statistics of `raw` on the device in `form`, and the tempered logits' bits.
std::vector<RowStats> device_stats(const std::vector<float>& raw, int64_t rows, int64_t vocab, float t,
                                   RowStatsForm form, std::vector<uint16_t>& tempered) {
  const size_t n = raw.size();
  const DeviceBuf x(raw), dt(n * 2), st(static_cast<size_t>(rows) * sizeof(RowStats));
  const Status s = row_stats_cuda(x.as<float>(), rows, vocab, t, dt.p, st.as<RowStats>(), nullptr, form);
  EXPECT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  tempered = dt.get<uint16_t>(n);
  return st.get<RowStats>(static_cast<size_t>(rows));
}

TEST(RowStatsGroupsCuda, AgreeWithEachEntryAndTheCpuTwin) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  struct Shape {
    int64_t rows, vocab;
  };
  // The 26B-A4B vocabulary; one canvas at dg-tiny's; a vocabulary whose slices end past the last four-load step.
  const Shape shapes[] = {{4, 262144}, {256, 4096}, {37, 8200}};
  for (const Shape& sh : shapes) {
    SCOPED_TRACE(std::to_string(sh.rows) + " x " + std::to_string(sh.vocab));
    const size_t n = static_cast<size_t>(sh.rows * sh.vocab);
    std::mt19937 rng(static_cast<uint32_t>(sh.vocab + 7));
    std::uniform_real_distribution<float> d(-30.0f, 30.0f);
    std::vector<float> raw(n);
    for (float& v : raw) v = d(rng);
    for (size_t i = 0; i < n; i += 97) raw[i] = -INFINITY;  // masked entries weigh nothing
    // Ties for the max, where the lower index must win: two threads (row 0), one group of four (row 1), one thread
    // one load apart (row 2); a NaN poisons row 3; row 4 (where there is one) is all -inf.
    const auto at = [&](int64_t r, int64_t v) -> float& { return raw[static_cast<size_t>(r * sh.vocab + v)]; };
    at(0, 5) = at(0, 9) = 40.0f;
    at(1, 6) = at(1, 7) = 40.0f;
    at(2, 2) = at(2, 2 + 4 * 256) = 40.0f;
    at(3, 11) = NAN;
    if (sh.rows > 4)
      for (int64_t v = 0; v < sh.vocab; ++v) at(4, v) = -INFINITY;
    constexpr float kT = 0.85f;
    std::vector<uint16_t> t_each, t_groups;
    const auto each = device_stats(raw, sh.rows, sh.vocab, kT, RowStatsForm::kEach, t_each);
    const auto groups = device_stats(raw, sh.rows, sh.vocab, kT, RowStatsForm::kGroups, t_groups);
    std::vector<RowStats> cpu(static_cast<size_t>(sh.rows));
    std::vector<float> tempered(n);
    row_stats_cpu(raw.data(), sh.rows, sh.vocab, kT, tempered.data(), cpu.data());
    EXPECT_EQ(t_each, t_groups) << "tempered logits";
    EXPECT_EQ(groups[0].argmax, 5);
    EXPECT_EQ(groups[1].argmax, 6);
    EXPECT_EQ(groups[2].argmax, 2);
    for (size_t r = 0; r < cpu.size(); ++r) {
      EXPECT_EQ(groups[r].argmax, each[r].argmax) << "row " << r;
      EXPECT_EQ(std::isnan(groups[r].entropy), std::isnan(each[r].entropy)) << "row " << r;
      if (r == 3 || r == 4) continue;  // poisoned and empty rows: the forms agree above; no numbers to compare
      EXPECT_EQ(groups[r].argmax, cpu[r].argmax) << "row " << r;
      EXPECT_NEAR(groups[r].entropy, each[r].entropy, 1e-6 * std::max(1.0f, each[r].entropy)) << "row " << r;
      EXPECT_NEAR(groups[r].entropy, cpu[r].entropy, 1e-5) << "row " << r;
      EXPECT_NEAR(groups[r].p_max, each[r].p_max, 1e-6 * each[r].p_max) << "row " << r;
      EXPECT_NEAR(groups[r].p_max, cpu[r].p_max, 1e-5 * cpu[r].p_max) << "row " << r;
      EXPECT_GT(groups[r].entropy, 0.1f) << "row " << r << ": the rows must be far from one-hot";
    }
    EXPECT_TRUE(std::isnan(groups[3].entropy)) << "a NaN logit must not be dropped";
  }
}

TEST(RowStatsOpenCuda, RefusesHalfTheScales) {
  alignas(16) static float fake[64];
  auto refused = [](const Status& s, const char* says) {
    EXPECT_FALSE(s.is_ok()) << says;
    EXPECT_NE(s.message().find(says), std::string::npos) << s.message();
  };
  refused(row_stats_open_cuda(fake, 1, 16, OpenLogitsIn{fake, nullptr, 30.0f}, 1.0f, fake, nullptr, nullptr),
          "come together");
  refused(row_stats_open_cuda(fake, 1, 15, OpenLogitsIn{fake, fake, 30.0f}, 1.0f, fake, nullptr, nullptr),
          "vocab % 4 == 0");
  refused(row_stats_open_cuda(fake + 1, 1, 16, OpenLogitsIn{fake, fake, 30.0f}, 1.0f, fake, nullptr, nullptr),
          "16-byte aligned");
}

}  // namespace row_stats_open_cuda_test
}  // namespace dg::test
#endif
