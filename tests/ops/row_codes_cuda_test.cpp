// The launches that write a W8A8 product's input and its E4M3 row codes together (RowCodes: rmsnorm_codes_cuda,
// residual_norms_cuda with codes for out[0], gelu_mul_split_scaled_codes_cuda) against the kernel that writes the
// input followed by moe_act_quant_fp8_cuda over what it stored: the same bytes (input, codes, scales), on the
// 26B-A4B shapes (256 canvas rows of 2,816 and of the dense MLP's 2,112), rows a warp norms (704), the widest rows
// (4,096), an all-zero row; shapes past the fused kernels are refused by name. Skipped without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ops/glu/glu_cuda.h"
#include "ops/moe/moe_cuda.h"
#include "ops/residual/residual.h"
#include "ops/rmsnorm/rmsnorm_cuda.h"
#include "support/seeded.h"

#if defined(DG_WITH_CUDA)
#include "core/cuda/cuda_check.h"
#include "support/device_buf.h"

namespace dg {
namespace row_codes_cuda_test {

using test::DeviceBuf;
using test::seeded_uniform;
using test::seeded_uniform_bf16;

// moe_act_quant_fp8_cuda over y's rows, then the bytes of y, codes and scales against the fused launch's.
void expect_same_codes(const DeviceBuf& y_want, const DeviceBuf& y_got, const DeviceBuf& codes,
                       const DeviceBuf& scale, int64_t rows, int64_t cols) {
  const size_t n = static_cast<size_t>(rows * cols), r = static_cast<size_t>(rows);
  const DeviceBuf q(n), s(r * 4);
  const Status st = moe_act_quant_fp8_cuda(y_want.p, rows, cols, q.p, s.as<float>(), nullptr);
  ASSERT_TRUE(st.is_ok()) << st.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint16_t> want = y_want.get<uint16_t>(n);
  EXPECT_EQ(y_got.get<uint16_t>(n), want) << "the input as stored";
  EXPECT_EQ(codes.get<uint8_t>(n), q.get<uint8_t>(n)) << "codes";
  const std::vector<float> got_s = scale.get<float>(r);
  EXPECT_EQ(got_s, s.get<float>(r)) << "scales";
  EXPECT_GT(got_s[r - 1], 0.0f) << "a live row's scale";
}

void rmsnorm_case(int64_t rows, int64_t dim, uint64_t seed) {
  SCOPED_TRACE("rmsnorm, " + std::to_string(rows) + " rows of " + std::to_string(dim));
  const size_t n = static_cast<size_t>(rows * dim);
  std::vector<uint16_t> x = seeded_uniform_bf16(n, seed, -30.0f, 30.0f);
  for (int64_t c = 0; c < dim; ++c) x[static_cast<size_t>(c)] = 0;  // row 0 all zero: scale 0, codes 0
  const DeviceBuf dx(x), dw(seeded_uniform_bf16(static_cast<size_t>(dim), seed + 1, -2.0f, 2.0f)), y1(n * 2),
      y2(n * 2), codes(n), scale(static_cast<size_t>(rows) * 4);
  const float eps = 1e-6f;
  ASSERT_TRUE(rmsnorm_codes_fits(dx.p, dw.p, y2.p, codes.p, dim));
  Status st = rmsnorm_cuda(dx.p, DType::kBF16, dw.p, DType::kBF16, y1.p, DType::kBF16, rows, dim, eps, nullptr);
  ASSERT_TRUE(st.is_ok()) << st.message();
  st = rmsnorm_codes_cuda(dx.p, dw.p, y2.p, rows, dim, eps, codes.p, scale.as<float>(), nullptr);
  ASSERT_TRUE(st.is_ok()) << st.message();
  expect_same_codes(y1, y2, codes, scale, rows, dim);
  EXPECT_EQ(scale.get<float>(1)[0], 0.0f);
}

TEST(RowCodesCuda, TheInputNormWritesTheQuantisersBytes) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  rmsnorm_case(256, 2816, 1);  // a 26B-A4B canvas: a block a row
  rmsnorm_case(37, 704, 2);    // a warp a row, as rmsnorm_cuda norms it
  rmsnorm_case(5, 4096, 3);    // the widest rows
}

void residual_case(int64_t rows, int64_t dim, int n_out, bool raw, uint64_t seed) {
  SCOPED_TRACE("residual_norms, " + std::to_string(rows) + " rows of " + std::to_string(dim) + ", " +
               std::to_string(n_out) + " outputs" + (raw ? ", raw sums" : ""));
  const size_t n = static_cast<size_t>(rows * dim), d = static_cast<size_t>(dim);
  const DeviceBuf h(seeded_uniform_bf16(n, seed, -2.0f, 2.0f)), attn(seeded_uniform_bf16(n, seed + 1, -9.0f, 9.0f)),
      w_post(seeded_uniform_bf16(d, seed + 2, -1.5f, 1.5f)), w0(seeded_uniform_bf16(d, seed + 3, -1.5f, 1.5f)),
      w1(seeded_uniform_bf16(d, seed + 4, -1.5f, 1.5f)),
      row_s(seeded_uniform(static_cast<size_t>(rows), seed + 5, 0.01f, 0.1f)),
      col_s(seeded_uniform(d, seed + 6, 0.01f, 0.1f)), h1a(n * 2), h1b(n * 2), a0(n * 2), a1(n * 2), b0(n * 2),
      b1(n * 2), codes(n), scale(static_cast<size_t>(rows) * 4);
  const RawRowScales rs = raw ? RawRowScales{row_s.as<float>(), col_s.as<float>()} : RawRowScales{};
  const void* ws[2] = {w0.p, w1.p};
  void* want[2] = {a0.p, a1.p};
  void* got[2] = {b0.p, b1.p};
  const float eps = 1e-6f;
  ASSERT_TRUE(residual_codes_fit(dim, {h.p, attn.p, w_post.p, h1b.p, w0.p, w1.p, b0.p, b1.p}, codes.p));
  Status st = residual_norms_cuda(h.p, attn.p, w_post.p, h1a.p, ws, want, n_out, rows, dim, eps, nullptr, rs);
  ASSERT_TRUE(st.is_ok()) << st.message();
  st = residual_norms_cuda(h.p, attn.p, w_post.p, h1b.p, ws, got, n_out, rows, dim, eps, nullptr, rs,
                           RowCodesOut{codes.p, scale.as<float>()});
  ASSERT_TRUE(st.is_ok()) << st.message();
  expect_same_codes(a0, b0, codes, scale, rows, dim);
  EXPECT_EQ(h1b.get<uint16_t>(n), h1a.get<uint16_t>(n)) << "h1";
  if (n_out > 1) {
    EXPECT_EQ(b1.get<uint16_t>(n), a1.get<uint16_t>(n)) << "out[1]";
  }
}

TEST(RowCodesCuda, ThePreFeedForwardNormWritesTheQuantisersBytes) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  residual_case(256, 2816, 2, true, 11);  // a 26B-A4B canvas after the o projection's raw sums
  residual_case(256, 2816, 2, false, 12);
  residual_case(37, 704, 1, false, 13);
  residual_case(3, 4096, 2, true, 14);
}

void gelu_case(int64_t rows, int64_t ff, int64_t up_col, int64_t ld, uint64_t seed) {
  SCOPED_TRACE("gated GELU, " + std::to_string(rows) + " rows of " + std::to_string(ff) + ", up from column " +
               std::to_string(up_col) + " of " + std::to_string(ld));
  const size_t n = static_cast<size_t>(rows * ff), f = static_cast<size_t>(ff);
  const DeviceBuf gu(seeded_uniform_bf16(static_cast<size_t>(rows * ld), seed, -600.0f, 600.0f)),
      xs(seeded_uniform(static_cast<size_t>(rows), seed + 1, 0.002f, 0.02f)),
      gs(seeded_uniform(f, seed + 2, 0.01f, 0.2f)), us(seeded_uniform(f, seed + 3, 0.01f, 0.2f)), y1(n * 2),
      y2(n * 2), codes(n), scale(static_cast<size_t>(rows) * 4);
  ASSERT_TRUE(gelu_mul_split_scaled_codes_fits(gu.p, ff, ld, up_col, y2.p, codes.p));
  Status st = gelu_mul_split_scaled_cuda(gu.p, rows, ff, ld, up_col, xs.as<float>(), gs.as<float>(), us.as<float>(),
                                         y1.p, nullptr);
  ASSERT_TRUE(st.is_ok()) << st.message();
  st = gelu_mul_split_scaled_codes_cuda(gu.p, rows, ff, ld, up_col, xs.as<float>(), gs.as<float>(), us.as<float>(),
                                        y2.p, codes.p, scale.as<float>(), nullptr);
  ASSERT_TRUE(st.is_ok()) << st.message();
  expect_same_codes(y1, y2, codes, scale, rows, ff);
}

TEST(RowCodesCuda, TheGatedGeluWritesTheQuantisersBytes) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  gelu_case(256, 2112, 2112, 4224, 21);  // the 26B-A4B dense MLP, gate | up as one product
  gelu_case(37, 704, 720, 1440, 22);     // up's columns past a gap, as two products placed apart
  gelu_case(4, 4096, 4096, 8192, 23);
}

TEST(RowCodesCuda, RowsPastTheFusedKernelsAreRefused) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const int64_t wide = 4104;
  const DeviceBuf x(2 * wide * 2), w(wide * 2), y(2 * wide * 2), codes(2 * wide), scale(8), gu(2 * 2 * wide * 2);
  EXPECT_FALSE(rmsnorm_codes_fits(x.p, w.p, y.p, codes.p, wide));
  Status st = rmsnorm_codes_cuda(x.p, w.p, y.p, 2, wide, 1e-6f, codes.p, scale.as<float>(), nullptr);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("rmsnorm_codes_cuda: dim 4104"), std::string::npos) << st.message();
  EXPECT_FALSE(gelu_mul_split_scaled_codes_fits(gu.p, wide, 2 * wide, wide, y.p, codes.p));
  st = gelu_mul_split_scaled_codes_cuda(gu.p, 2, wide, 2 * wide, wide, scale.as<float>(), scale.as<float>(),
                                        scale.as<float>(), y.p, codes.p, scale.as<float>(), nullptr);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("ff 4104"), std::string::npos) << st.message();
  EXPECT_FALSE(residual_codes_fit(wide, {x.p}, codes.p));
}

}  // namespace row_codes_cuda_test
}  // namespace dg
#endif
