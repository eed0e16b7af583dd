// Plane layouts and hand-computed encodings of every packed format (docs/FORMATS.md): the bytes of each plane for
// small inputs whose codes and scales can be worked out on paper.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/packed_layout.h"
#include "quant/packed_tensor.h"

namespace dg {
namespace codec_known_test {

std::vector<uint8_t> plane(const Tensor& t, int p) {
  const PackedLayout L = packed_layout(t.dtype, t.shape);
  const auto* b = static_cast<const uint8_t*>(t.data) + L.offset[p];
  return std::vector<uint8_t>(b, b + L.bytes[p]);
}

Tensor f32_tensor(Shape s, const std::vector<float>& v) {
  Tensor t = host_tensor(DType::kF32, s);
  std::memcpy(t.data, v.data(), v.size() * 4);
  return t;
}

std::vector<float> decoded(const Tensor& t) {
  const Tensor u = unpack_tensor(t);
  return std::vector<float>(u.f32(), u.f32() + u.numel());
}

TEST(PackedLayout, PlanesAreAlignedAndSized) {
  const PackedLayout q4 = packed_layout(DType::kQ4, Shape{3, 64, 96});  // 192 rows of 96
  ASSERT_EQ(q4.n_planes, 2);
  EXPECT_EQ(q4.rows, 192);
  EXPECT_EQ(q4.matrices, 3);
  EXPECT_EQ(q4.offset[0], 0);
  EXPECT_EQ(q4.bytes[0], 192 * 48);
  EXPECT_EQ(q4.offset[1], 192 * 48);
  EXPECT_EQ(q4.bytes[1], 192 * 3 * 4);
  EXPECT_EQ(q4.total * 8, 5 * 192 * 96);  // 5.0 bits per weight

  const PackedLayout q6 = packed_layout(DType::kQ6, Shape{64, 96});
  EXPECT_EQ(q6.total * 8, 7 * 64 * 96);  // 7.0 bits per weight

  const PackedLayout nv = packed_layout(DType::kNvFp4, Shape{2, 3, 16});  // 6 rows of 16
  ASSERT_EQ(nv.n_planes, 3);
  EXPECT_EQ(nv.bytes[0], 48);
  EXPECT_EQ(nv.offset[1], 64);
  EXPECT_EQ(nv.bytes[1], 6);
  EXPECT_EQ(nv.offset[2], 128);
  EXPECT_EQ(nv.bytes[2], 8);  // one f32 global per matrix
  EXPECT_EQ(nv.total, 192);

  const PackedLayout q8 = packed_layout(DType::kQ8, Shape{7, 111});
  EXPECT_EQ(q8.bytes[0], 777);
  EXPECT_EQ(q8.offset[1], 832);
  EXPECT_EQ(q8.bytes[1], 28);
  for (const PackedLayout* L : {&q4, &q6, &nv, &q8})
    for (int p = 0; p < L->n_planes; ++p) EXPECT_EQ(L->offset[p] % kPlaneAlign, 0);
}

TEST(PackedLayout, ShapeConstraints) {
  EXPECT_EQ(packed_shape_error(DType::kQ4, Shape{4, 64}), nullptr);
  EXPECT_STREQ(packed_shape_error(DType::kQ4, Shape{4, 48}), "the last (input) dimension K must be a multiple of 32");
  EXPECT_STREQ(packed_shape_error(DType::kQ6, Shape{2, 4, 24}), "the last (input) dimension K must be a multiple of 32");
  EXPECT_STREQ(packed_shape_error(DType::kNvFp4, Shape{4, 24}), "the last (input) dimension K must be a multiple of 16");
  EXPECT_EQ(packed_shape_error(DType::kNvFp4, Shape{4, 48}), nullptr);
  EXPECT_EQ(packed_shape_error(DType::kQ8, Shape{3, 7}), nullptr);
  EXPECT_EQ(packed_shape_error(DType::kFp8, Shape{2, 3, 5}), nullptr);
  EXPECT_STREQ(packed_shape_error(DType::kQ8, Shape{64}), "a packed weight needs rank 2 or more");
}

TEST(Q4, KnownEncoding) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i % 16 - 8);  // min -8, scale 1
  const Tensor q = pack_tensor(f32_tensor(Shape{1, 32}, x), DType::kQ4);
  const std::vector<uint8_t> codes = {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE,
                                      0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE};
  EXPECT_EQ(plane(q, 0), codes);
  EXPECT_EQ(plane(q, 1), (std::vector<uint8_t>{0x80, 0x3F, 0x00, 0xC1}));  // bf16 1.0, bf16 -8.0
  EXPECT_EQ(decoded(q), x);
}

TEST(Q6, KnownEncoding) {
  std::vector<float> x(32);
  for (int i = 0; i < 31; ++i) x[static_cast<size_t>(i)] = static_cast<float>(2 * i);
  x[31] = 63.0f;  // min 0, scale (63 - 0) / 63 = 1
  const Tensor q = pack_tensor(f32_tensor(Shape{1, 32}, x), DType::kQ6);
  EXPECT_EQ(plane(q, 0), (std::vector<uint8_t>{0x20, 0x64, 0xA8, 0xEC, 0x20, 0x64, 0xA8, 0xEC, 0x20, 0x64, 0xA8, 0xEC,
                                               0x20, 0x64, 0xA8, 0xFC}));
  EXPECT_EQ(plane(q, 1), (std::vector<uint8_t>{0x00, 0x00, 0x55, 0x55, 0xAA, 0xAA, 0xFF, 0xFF}));
  EXPECT_EQ(plane(q, 2), (std::vector<uint8_t>{0x80, 0x3F, 0x00, 0x00}));
  EXPECT_EQ(decoded(q), x);
}

TEST(Q8, KnownEncoding) {
  const Tensor q = pack_tensor(f32_tensor(Shape{2, 5}, {127.0f, -63.4f, 0.0f, 1.0f, 0.6f, 0, 0, 0, 0, 0}), DType::kQ8);
  EXPECT_EQ(plane(q, 0), (std::vector<uint8_t>{0x7F, 0xC1, 0x00, 0x01, 0x01, 0, 0, 0, 0, 0}));
  EXPECT_EQ(plane(q, 1), (std::vector<uint8_t>{0x00, 0x00, 0x80, 0x3F, 0, 0, 0, 0}));  // f32 1.0; a zero row: 0
  EXPECT_EQ(decoded(q), (std::vector<float>{127, -63, 0, 1, 1, 0, 0, 0, 0, 0}));
}

TEST(Fp8, KnownEncoding) {
  const Tensor q = pack_tensor(f32_tensor(Shape{2, 3}, {448.0f, -1.0f, 0.5f, 896.0f, -2.0f, 6.0f}), DType::kFp8);
  EXPECT_EQ(plane(q, 0), (std::vector<uint8_t>{0x7E, 0xB8, 0x30, 0x7E, 0xB8, 0x44}));
  EXPECT_EQ(plane(q, 1), (std::vector<uint8_t>{0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0x40}));  // 1.0, 2.0
  EXPECT_EQ(decoded(q), (std::vector<float>{448, -1, 0.5f, 896, -2, 6}));
}

TEST(NvFp4, KnownEncoding) {
  const std::vector<float> x = {6, 3, -1.5f, 0.5f, 0, 4, -6, 2, 1, 0, 0, 0, 0, 0, 0, 0};
  const Tensor q = pack_tensor(f32_tensor(Shape{1, 16}, x), DType::kNvFp4);
  EXPECT_EQ(plane(q, 0), (std::vector<uint8_t>{0x57, 0x1B, 0x60, 0x4F, 0x02, 0x00, 0x00, 0x00}));
  EXPECT_EQ(plane(q, 1), (std::vector<uint8_t>{0x7E}));  // block scale 448 (amax 6 / 6 / global)
  float global;
  std::memcpy(&global, plane(q, 2).data(), 4);
  EXPECT_EQ(global, 6.0f / (6.0f * 448.0f));
  const std::vector<float> w = decoded(q);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(w[i], x[i], 1e-6) << i;
}

}  // namespace codec_known_test
}  // namespace dg
