// linear_e4m3_rows_cuda (src/ops/linear/e4m3_rows.cu, our W8A8 product for at most 256 rows) against f64 sums of
// the same E4M3 codes, and against cuBLASLt's product (Fp8Gemm) on the same device: every element within the bf16
// rounding of its sum plus the tensor cores' accumulation (docs/NUMERICS.md, "Our W8A8 product for few rows"). Shapes:
// the 26B-A4B step's products (q/k/v side by side, o, gate/up, down with K not a multiple of the 128-code stage),
// rows that fill one consumer or part of one, a weight tile cut short by N, a strided output at a column offset, f32
// outputs, every split count, and the same bits on a second run. The refusals need no GPU.
#include <gtest/gtest.h>

#if defined(DG_WITH_CUDA)
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/fp8_gemm.h"
#include "core/cuda/cuda_check.h"
#include "core/dtype.h"
#include "ops/linear/e4m3_rows_cuda.h"
#include "quant/minifloat.h"
#include "support/device_buf.h"

namespace dg::test {
namespace e4m3_rows_cuda_test {

void refused(const Status& s, const char* says) {
  EXPECT_FALSE(s.is_ok()) << says;
  EXPECT_NE(s.message().find(says), std::string::npos) << s.message();
}

TEST(E4m3RowsCuda, RefusesWhatItCannotTake) {
  alignas(16) static uint8_t fake[4096];
  refused(e4m3_rows_takes(257, 128, 128, fake, fake, fake, false, 128), "1 to 256");
  refused(e4m3_rows_takes(0, 128, 128, fake, fake, fake, false, 128), "1 to 256");
  refused(e4m3_rows_takes(4, 120, 128, fake, fake, fake, false, 128), "multiples of 16");
  refused(e4m3_rows_takes(4, 128, 40, fake, fake, fake, false, 128), "multiples of 16");
  refused(e4m3_rows_takes(4, 128, 128, fake, fake, fake, false, 96), "at least its 128 columns");
  refused(e4m3_rows_takes(4, 128, 128, fake, fake, fake, false, 130), "multiple of 4");
  refused(e4m3_rows_takes(4, 128, 128, fake + 8, fake, fake, false, 128), "16-byte aligned");
  refused(e4m3_rows_takes(4, 128, 128, fake, fake, fake + 4, false, 128), "8-byte aligned");
  refused(e4m3_rows_takes(4, 128, 128, fake, fake, fake + 8, true, 128), "16-byte aligned");
}

struct Case {
  int64_t rows, k, n;
  int64_t ld = 0, col0 = 0;  // the output's row stride (0: n) and its first column
  bool f32 = false;
  int splits = 0;
};

std::vector<uint8_t> random_codes(size_t count, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> v(count);
  for (uint8_t& b : v) {
    do b = static_cast<uint8_t>(byte(rng));
    while ((b & 0x7f) == 0x7f);  // no NaN codes
  }
  return v;
}

// The outputs [rows, n] as floats, read from a buffer of rows x ld elements at column col0.
std::vector<float> outputs(const test::DeviceBuf& out, const Case& c, int64_t ld) {
  const size_t total = static_cast<size_t>(c.rows * ld);
  std::vector<float> v(static_cast<size_t>(c.rows * c.n));
  if (c.f32) {
    const auto h = out.get<float>(total);
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t j = 0; j < c.n; ++j) v[static_cast<size_t>(r * c.n + j)] = h[static_cast<size_t>(r * ld + c.col0 + j)];
  } else {
    const auto h = out.get<uint16_t>(total);
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t j = 0; j < c.n; ++j)
        v[static_cast<size_t>(r * c.n + j)] = bf16_to_f32(h[static_cast<size_t>(r * ld + c.col0 + j)]);
  }
  return v;
}

// The worst ratio of |got - f64 sum| to its bound over the outputs: the output's rounding (bf16: 2^-8 of the sum;
// f32: 2^-22) plus 2^-11 of the products' magnitudes (the tensor cores' sums of a stage; full-range codes, whose
// products span 2^35, put cuBLASLt's e4m3 product at 1.35 of 2^-12 on the H100, and ours with it).
double worst_ratio(const std::vector<float>& got, const std::vector<double>& ref, const std::vector<double>& mag,
                   bool f32) {
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double bound = (f32 ? 0x1p-22 : 0x1p-8) * std::fabs(ref[i]) + 0x1p-11 * mag[i] + 1e-30;
    EXPECT_TRUE(std::isfinite(got[i])) << "output " << i;
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - ref[i]) / bound);
  }
  return worst;
}

void run_case(const Case& c, Fp8Gemm& lt) {
  const int64_t ld = c.ld == 0 ? c.n : c.ld;
  SCOPED_TRACE(std::to_string(c.rows) + " x " + std::to_string(c.k) + " x " + std::to_string(c.n) + ", ld " +
               std::to_string(ld) + " at " + std::to_string(c.col0) + (c.f32 ? ", f32" : ", bf16") + ", splits " +
               std::to_string(c.splits));
  std::mt19937 rng(static_cast<uint32_t>(c.rows * 7919 + c.k * 31 + c.n));
  const auto x = random_codes(static_cast<size_t>(c.rows * c.k), rng);
  const auto w = random_codes(static_cast<size_t>(c.n * c.k), rng);
  std::vector<double> ref(static_cast<size_t>(c.rows * c.n)), mag(ref.size());
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t j = 0; j < c.n; ++j) {
      double s = 0.0, m = 0.0;
      for (int64_t q = 0; q < c.k; ++q) {
        const double p = static_cast<double>(e4m3_to_f32(x[static_cast<size_t>(r * c.k + q)])) *
                         e4m3_to_f32(w[static_cast<size_t>(j * c.k + q)]);
        s += p;
        m += std::fabs(p);
      }
      ref[static_cast<size_t>(r * c.n + j)] = s;
      mag[static_cast<size_t>(r * c.n + j)] = m;
    }
  const size_t elem = c.f32 ? 4 : 2, out_bytes = static_cast<size_t>(c.rows * ld) * elem;
  const DeviceBuf dx(x), dw(w), own(out_bytes), again(out_bytes), theirs(out_bytes);
  for (const DeviceBuf* b : {&own, &again, &theirs}) ASSERT_EQ(cudaMemset(b->p, 0, out_bytes), cudaSuccess);
  auto at = [&](const DeviceBuf& b) { return static_cast<uint8_t*>(b.p) + static_cast<size_t>(c.col0) * elem; };
  for (const DeviceBuf* b : {&own, &again}) {
    const Status s = linear_e4m3_rows_cuda(dx.p, c.rows, c.k, dw.p, c.n, at(*b), c.f32, ld, nullptr, c.splits);
    ASSERT_TRUE(s.is_ok()) << s.message();
  }
  if (c.f32) lt.run(dx.p, c.rows, c.k, dw.p, c.n, reinterpret_cast<float*>(at(theirs)), nullptr);
  else lt.run_bf16(dx.p, c.rows, c.k, dw.p, c.n, at(theirs), ld, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto got = outputs(own, c, ld);
  EXPECT_EQ(own.get<uint8_t>(out_bytes), again.get<uint8_t>(out_bytes)) << "the same bits on a second run";
  if (c.ld > c.n) {  // the columns outside [col0, col0 + n) stay untouched
    const auto bytes = own.get<uint8_t>(out_bytes);
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t j = 0; j < ld; ++j) {
        if (j >= c.col0 && j < c.col0 + c.n) continue;
        for (size_t b = 0; b < elem; ++b)
          ASSERT_EQ(bytes[static_cast<size_t>(r * ld + j) * elem + b], 0) << "row " << r << " column " << j;
      }
  }
  const double ours = worst_ratio(got, ref, mag, c.f32), lts = worst_ratio(outputs(theirs, c, ld), ref, mag, c.f32);
  std::printf("e4m3 rows %lld x %lld x %lld (%s, splits %d -> %d): worst error / bound %.3f (cuBLASLt %.3f)\n",
              static_cast<long long>(c.rows), static_cast<long long>(c.k), static_cast<long long>(c.n),
              c.f32 ? "f32" : "bf16", c.splits, c.splits ? c.splits : e4m3_rows_splits(c.k, c.n), ours, lts);
  EXPECT_LE(ours, 1.0);
}

TEST(E4m3RowsCuda, MatchesTheF64SumsOfTheCodes) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  if (!e4m3_rows_takes(1, 16, 16, nullptr, nullptr, nullptr, false, 16).is_ok()) GTEST_SKIP() << "not a Hopper GPU";
  void* ws = nullptr;
  ASSERT_EQ(cudaMalloc(&ws, 32 << 20), cudaSuccess);
  {
    Fp8Gemm lt(ws, 32 << 20);
    const Case cases[] = {
        {256, 2816, 8224},                // q/k/v of a sliding layer side by side
        {256, 4096, 2816},                // o
        {256, 2816, 4240},                // the dense gate/up side by side
        {256, 2112, 2816},                // down: K past its last whole stage
        {200, 2816, 4240, 8480, 2112},    // rows past the first consumer; a strided output at a column offset
        {256, 4096, 2816, 0, 0, true},    // f32 outputs
        {1, 64, 16},                      // one row, one short stage, a weight tile of 16 rows
        {64, 160, 144},                   // one consumer's first half
        {65, 288, 272},                   // one consumer, both halves
        {128, 512, 400},                  //
        {129, 512, 400},                  // the second consumer, one row
        {256, 4096, 2816, 0, 0, false, 1},  // every split count
        {256, 4096, 2816, 0, 0, false, 2},
        {256, 4096, 2816, 0, 0, false, 3},
        {256, 4096, 2816, 0, 0, false, 4},
        {37, 1024, 1040, 0, 0, true, 3},  //
    };
    for (const Case& c : cases) run_case(c, lt);
  }
  cudaFree(ws);
}

TEST(E4m3RowsCuda, RefusesSplitsOutsideTheRange) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  if (!e4m3_rows_takes(1, 16, 16, nullptr, nullptr, nullptr, false, 16).is_ok()) GTEST_SKIP() << "not a Hopper GPU";
  const DeviceBuf x(4096), w(4096), out(4096);
  refused(linear_e4m3_rows_cuda(x.p, 4, 256, w.p, 16, out.p, false, 16, nullptr, 5), "1 to 2");
  refused(linear_e4m3_rows_cuda(x.p, 4, 256, w.p, 16, out.p, false, 16, nullptr, 3), "1 to 2");
}

}  // namespace e4m3_rows_cuda_test
}  // namespace dg::test
#endif  // DG_WITH_CUDA
