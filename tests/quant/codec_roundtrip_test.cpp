// Round trips of every packed format on odd shapes with seeded values (outliers, zero rows, constant groups): each
// decoded weight stays within the format's own error bound, computed from the scales stored for it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/packed_layout.h"
#include "quant/minifloat.h"
#include "quant/packed_tensor.h"

namespace dg {
namespace codec_roundtrip_test {

// Gaussian weights with a few 20x outliers, one all-zero row and one constant row (the edge cases of the scales).
Tensor weights(Shape s, uint32_t seed) {
  Tensor t = host_tensor(DType::kF32, s);
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 0.02f);
  const int64_t K = s[s.rank - 1];
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = (i % 97 == 5 ? 20.0f : 1.0f) * n(rng);
  for (int64_t k = 0; k < K; ++k) t.f32()[K + k] = 0.0f;            // row 1
  for (int64_t k = 0; k < K; ++k) t.f32()[2 * K + k] = 0.0123f;     // row 2
  return t;
}

float f32_at(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

// The largest |w - x| the format allows for element (r, k), from the scales stored in the packed tensor.
double bound(const Tensor& q, const PackedLayout& L, int64_t r, int64_t k, float x) {
  const auto* base = static_cast<const uint8_t*>(q.data);
  const double slack = 1e-6 * std::fabs(x) + 1e-12;
  switch (q.dtype) {
    case DType::kQ4: case DType::kQ6: {
      const uint8_t* sm = base + L.offset[q.dtype == DType::kQ4 ? 1 : 2] + (r * (L.cols / 32) + k / 32) * 4;
      return 0.5 * bf16_to_f32(static_cast<uint16_t>(sm[0] | (sm[1] << 8))) * (1 + 1e-5) + slack;
    }
    case DType::kQ8: return 0.5 * f32_at(base + L.offset[1] + r * 4) * (1 + 1e-5) + slack;
    case DType::kFp8: {
      const double scale = f32_at(base + L.offset[1] + r * 4);
      return std::max(std::fabs(x) / 16.0, scale / 1024.0) * (1 + 1e-5) + slack;
    }
    case DType::kNvFp4: {
      const int64_t m = r / (L.rows / L.matrices);
      const double step = e4m3_to_f32(base[L.offset[1] + r * (L.cols / 16) + k / 16]) * f32_at(base + L.offset[2] + m * 4);
      return step * (1 + 1e-5) + slack;  // the widest E2M1 gap (4 to 6) is 2 steps
    }
    default: return 0;
  }
}

struct Case {
  DType fmt;
  Shape shape;
};

class RoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(RoundTrip, WithinTheFormatsBound) {
  const Case c = GetParam();
  const Tensor x = weights(c.shape, 7);
  const Tensor q = pack_tensor(x, c.fmt);
  ASSERT_EQ(q.nbytes(), static_cast<size_t>(packed_layout(c.fmt, c.shape).total));
  const Tensor w = unpack_tensor(q);
  const PackedLayout L = packed_layout(c.fmt, c.shape);
  double worst = 0, sq_err = 0, sq = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float xi = x.f32()[i], wi = w.f32()[i];
    ASSERT_TRUE(std::isfinite(wi)) << i;
    const double e = std::fabs(static_cast<double>(wi) - xi);
    ASSERT_LE(e, bound(q, L, i / L.cols, i % L.cols, xi)) << dtype_name(c.fmt) << " element " << i << " x=" << xi
                                                           << " w=" << wi;
    worst = std::max(worst, e);
    sq_err += e * e;
    sq += static_cast<double>(xi) * xi;
  }
  for (int64_t k = 0; k < L.cols; ++k) EXPECT_EQ(w.f32()[L.cols + k], 0.0f) << "the zero row decodes to zero";
  std::printf("  %s %s: max_abs %.3e, relative rms error %.4f\n", std::string(dtype_name(c.fmt)).c_str(),
              c.shape.str().c_str(), worst, std::sqrt(sq_err / sq));
  // Packing is a pure function of the values: the same input gives the same bytes.
  const Tensor again = pack_tensor(x, c.fmt);
  EXPECT_EQ(std::memcmp(q.data, again.data, q.nbytes()), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Formats, RoundTrip,
    ::testing::Values(Case{DType::kQ4, Shape{7, 96}}, Case{DType::kQ4, Shape{3, 111, 64}},
                      Case{DType::kQ6, Shape{7, 96}}, Case{DType::kQ6, Shape{3, 111, 64}},
                      Case{DType::kQ8, Shape{7, 111}}, Case{DType::kQ8, Shape{3, 5, 989}},
                      Case{DType::kFp8, Shape{7, 111}}, Case{DType::kFp8, Shape{3, 5, 989}},
                      Case{DType::kNvFp4, Shape{7, 112}}, Case{DType::kNvFp4, Shape{3, 111, 48}}),
    [](const ::testing::TestParamInfo<Case>& i) {
      std::string n = std::string(dtype_name(i.param.fmt));
      for (int d = 0; d < i.param.shape.rank; ++d) n += "_" + std::to_string(i.param.shape[d]);
      return n;
    });

TEST(WeightRows, RowRangesAcrossMatricesMatchTheWholeTensor) {
  const Tensor x = weights(Shape{3, 5, 32}, 11);
  for (DType fmt : {DType::kQ4, DType::kNvFp4, DType::kQ8}) {
    const Tensor q = pack_tensor(x, fmt);
    const Tensor all = unpack_tensor(q);
    std::vector<float> part(7 * 32);
    weight_rows_f32(q, 4, 7, part.data());  // rows 4..10 span all three matrices
    for (size_t i = 0; i < part.size(); ++i) ASSERT_EQ(part[i], all.f32()[4 * 32 + static_cast<int64_t>(i)]) << i;
  }
  std::vector<float> raw(2 * 32);
  weight_rows_f32(x, 3, 2, raw.data());
  EXPECT_EQ(std::memcmp(raw.data(), x.f32() + 3 * 32, raw.size() * 4), 0);
}

TEST(PackTensor, RefusesBadShapesAndNonFiniteValues) {
  EXPECT_THROW(pack_tensor(host_tensor(DType::kF32, Shape{4, 24}), DType::kQ4), Error);
  Tensor x = host_tensor(DType::kF32, Shape{2, 32});
  x.f32()[33] = NAN;
  EXPECT_THROW(pack_tensor(x, DType::kQ8), Error);
}

}  // namespace codec_roundtrip_test
}  // namespace dg
