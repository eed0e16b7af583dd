// heads_norm_cuda with the rows' rotations read from rope_table_cuda's table against the same launch computing them
// per head: the same bits (the table holds the rounded cos and sin the heads compute), over several spans (more than
// one launch's worth), the sliding layers' fully rotated head dim 256 and the full layers' 512 with 64 of 256 pairs
// rotated. And its f16 copies of the keys and values (HeadsBlock::dst16, what the flash kernels read): the bits
// convert_cuda makes of the bf16 results, which stay as they were. The CPU twin of all is rmsnorm then rope
// (conformance: qkv_heads).
#include <gtest/gtest.h>

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "ops/elementwise/elementwise.h"
#include "ops/rmsnorm/rmsnorm_cuda.h"
#include "ops/rope/rope_cuda.h"
#include "support/device_buf.h"
#include "support/seeded.h"

namespace dg {
namespace {

using Buf = test::DeviceBuf;

// rows split into n_spans spans of equal rows (the last takes the rest) at positions 4099 k + 3 + row offset.
// v_from_k: the v heads read the k product's columns (a full layer: V is the raw K product).
void run_case(int64_t rows, int64_t q_heads, int64_t kv_heads, int64_t dim, int64_t rotated, int n_spans,
              bool v_from_k = false) {
  const std::string what = std::to_string(rows) + " rows, dim " + std::to_string(dim) + ", " +
                           std::to_string(n_spans) + " spans";
  const int64_t ld = (q_heads + 2 * kv_heads) * dim, half = dim / 2;
  const std::vector<uint16_t> x = test::seeded_uniform_bf16(static_cast<size_t>(rows * ld), 7, -3.0f, 3.0f);
  const std::vector<uint16_t> wq = test::seeded_uniform_bf16(static_cast<size_t>(dim), 8, 0.5f, 1.5f);
  const std::vector<uint16_t> wk = test::seeded_uniform_bf16(static_cast<size_t>(dim), 9, 0.5f, 1.5f);
  std::vector<float> inv_freq(static_cast<size_t>(half), 0.0f);
  for (int64_t j = 0; j < rotated; ++j) inv_freq[static_cast<size_t>(j)] = std::pow(10000.0f, -2.0f * j / dim);
  std::vector<RopeSpan> spans;
  const int64_t per = rows / n_spans;
  for (int k = 0; k < n_spans; ++k)
    spans.push_back(RopeSpan{k * per, k + 1 == n_spans ? rows - k * per : per, 4099 * k + 3});
  const Buf dx(x), dwq(wq), dwk(wk), dfreq(inv_freq), table(static_cast<size_t>(rows * half) * 4);
  const size_t q_n = static_cast<size_t>(rows * q_heads * dim), kv_n = static_cast<size_t>(rows * kv_heads * dim);
  // Runs: 0 per-head rotations, 1 the table with the f16 copies of k and v, 2 per-head rotations with them.
  std::vector<uint16_t> got[3][3], copy16[3][2], converted16[3][2];
  for (int run = 0; run < 3; ++run) {
    const bool with_table = run == 1, with_f16 = run > 0;
    const Buf q(q_n * 2), k(kv_n * 2), v(kv_n * 2), k16(kv_n * 2), v16(kv_n * 2);
    const auto* src = static_cast<const uint8_t*>(dx.p);
    const uint8_t* k_src = src + q_heads * dim * 2;
    const HeadsBlock blocks[3] = {
        {src, ld, q_heads, dwq.p, true, q.p},
        {k_src, ld, kv_heads, dwk.p, true, k.p, with_f16 ? k16.p : nullptr},
        {v_from_k ? k_src : k_src + kv_heads * dim * 2, ld, kv_heads, nullptr, false, v.p,
         with_f16 ? v16.p : nullptr}};
    if (with_table) {
      const Status s = rope_table_cuda(spans.data(), n_spans, rows, half, static_cast<const float*>(dfreq.p),
                                       table.p, nullptr);
      ASSERT_TRUE(s.is_ok()) << s.message();
    }
    const Status s = heads_norm_cuda(blocks, 3, rows, dim, 1e-6f, spans.data(), n_spans,
                                     static_cast<const float*>(dfreq.p), nullptr, with_table ? table.p : nullptr);
    ASSERT_TRUE(s.is_ok()) << s.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
    got[run][0] = q.get<uint16_t>(q_n);
    got[run][1] = k.get<uint16_t>(kv_n);
    got[run][2] = v.get<uint16_t>(kv_n);
    if (with_f16) {
      const Buf* kv[2] = {&k, &v};
      const Buf* kv16[2] = {&k16, &v16};
      for (int b = 0; b < 2; ++b) {
        copy16[run][b] = kv16[b]->get<uint16_t>(kv_n);  // 16-bit patterns
        const Buf conv(kv_n * 2);
        const Status c = convert_cuda(kv[b]->p, DType::kBF16, conv.p, DType::kF16, static_cast<int64_t>(kv_n),
                                      nullptr);
        ASSERT_TRUE(c.is_ok()) << c.message();
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
        converted16[run][b] = conv.get<uint16_t>(kv_n);
      }
    }
  }
  const char* names[3] = {"q", "k", "v"};
  for (int run = 1; run < 3; ++run)
    for (int b = 0; b < 3; ++b) {
      size_t differ = 0;
      for (size_t i = 0; i < got[0][b].size(); ++i) differ += got[0][b][i] != got[run][b][i];
      EXPECT_EQ(differ, 0u) << what << ", run " << run << ": " << names[b] << " differs in " << differ << " of "
                            << got[0][b].size();
    }
  for (int run = 1; run < 3; ++run)
    for (int b = 0; b < 2; ++b) {
      size_t differ = 0;
      for (size_t i = 0; i < kv_n; ++i) differ += copy16[run][b][i] != converted16[run][b][i];
      EXPECT_EQ(differ, 0u) << what << ", run " << run << ": the f16 copy of " << names[b + 1]
                            << " differs from convert_cuda's in " << differ << " of " << kv_n;
    }
}

TEST(HeadsNormTableCuda, SameBitsAsPerHeadRotationAndTheF16Copies) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine";
  run_case(256, 16, 8, 256, 128, 1);   // a 26B-A4B sliding layer's canvas
  run_case(300, 16, 2, 512, 64, 3);    // a full layer's: 64 of 256 pairs rotated
  run_case(256, 16, 2, 512, 64, 1, true);  // ... with V the raw K product
  run_case(8192, 4, 2, 256, 128, 70);  // more spans than one launch takes (64)
  run_case(7, 3, 1, 16, 8, 2);         // the smallest warp head (one head row a warp: 5 a row)
  run_case(40, 4, 1, 1024, 512, 2);    // the widest head (two head rows a warp)
}

TEST(HeadsNormTableCuda, RefusesSpansThatLeaveRowsOut) {
  const RopeSpan spans[2] = {{0, 4, 0}, {5, 3, 9}};
  const Status s = rope_table_cuda(spans, 2, 8, 64, nullptr, nullptr, nullptr);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("without gaps"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace dg
#endif
