// The flash attention's split combine writing the output's E4M3 row codes (attention_flash_cuda with FlashCodes, the
// W8A8 o projection's input): the output bit for bit as without codes, and the codes and row scales bit for bit as
// moe_act_quant_fp8_cuda gives for the stored output (whose CPU twin act_quant_fp8_rows is tested in the op
// conformance cases). Canvas shapes whose keys split (the real sliding and full layers, a small head and a ring of
// many splits), with the wgmma blocks where the device has them; with one split there is no combine and no codes.
// Skipped without a GPU.
#include <gtest/gtest.h>

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "core/dtype.h"
#include "ops/attention/attention_cuda.h"
#include "ops/moe/moe_cuda.h"
#include "support/device_buf.h"
#include "support/seeded.h"

namespace dg {
namespace attention_codes_cuda_test {

using test::DeviceBuf;

struct Case {
  const char* name;
  int64_t heads, kv_heads, dim, rows, cap, from, to;
  bool ring;
};

std::vector<uint16_t> rounded(size_t n, uint64_t seed, float scale, uint16_t (*f)(float)) {
  std::vector<uint16_t> out(n);
  const std::vector<float> v = test::seeded_uniform(n, seed, -scale, scale);
  for (size_t i = 0; i < n; ++i) out[i] = f(v[i]);
  return out;
}

TEST(AttentionCodesCuda, CombineCodesMatchQuantisingTheOutput) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine";
  const Case cases[] = {{"canvas real sliding", 16, 8, 256, 256, 1023, 1000, 2023, true},
                        {"canvas real full", 16, 2, 512, 256, 1400, 0, 1100, false},
                        {"canvas ring d64", 4, 2, 64, 20, 2048, 300, 2190, true},
                        {"canvas ring d512 many splits", 16, 2, 512, 20, 2048, 300, 2190, true}};
  for (const Case& c : cases) {
    const int64_t kv_row = c.kv_heads * c.dim, width = c.heads * c.dim, n = c.rows * width;
    const DeviceBuf q(rounded(static_cast<size_t>(n), 21, 2.0f, f32_to_bf16));
    const DeviceBuf kf(rounded(static_cast<size_t>(c.rows * kv_row), 22, 1.5f, f32_to_f16));
    const DeviceBuf vf(rounded(static_cast<size_t>(c.rows * kv_row), 23, 1.0f, f32_to_f16));
    const DeviceBuf ck(rounded(static_cast<size_t>(c.cap * kv_row), 24, 1.5f, f32_to_f16));
    const DeviceBuf cv(rounded(static_cast<size_t>(c.cap * kv_row), 25, 1.0f, f32_to_f16));
    const CachedKv cached{ck.p, cv.p, c.cap, c.ring, c.from, c.to};
    const AttnShape shape{c.heads, c.kv_heads, c.dim};
    const DeviceBuf plain(static_cast<size_t>(n) * 2), out(static_cast<size_t>(n) * 2);
    const DeviceBuf codes(static_cast<size_t>(n)), scale(static_cast<size_t>(c.rows) * 4);
    const DeviceBuf want_codes(static_cast<size_t>(n)), want_scale(static_cast<size_t>(c.rows) * 4);
    for (const bool wgmma : {false, true}) {
      if (wgmma && ((c.dim != 256 && c.dim != 512) || !attention_flash_wgmma_available())) continue;
      for (const int max_splits : {16, 1}) {
        const std::string name = std::string(c.name) + (wgmma ? " wgmma" : "") + " splits<=" +
                                 std::to_string(max_splits);
        Status s = attention_flash_cuda(q.p, c.rows, c.to, cached, kf.p, vf.p, c.rows, c.to, shape, false, 0,
                                        plain.p, nullptr, max_splits, 256, 0, wgmma);
        ASSERT_TRUE(s.is_ok()) << name << ": " << s.message();
        ASSERT_EQ(cudaMemset(codes.p, 0, static_cast<size_t>(n)), cudaSuccess);
        FlashCodes fc{codes.p, scale.as<float>()};
        s = attention_flash_cuda(q.p, c.rows, c.to, cached, kf.p, vf.p, c.rows, c.to, shape, false, 0, out.p,
                                 nullptr, max_splits, 256, 0, wgmma, &fc);
        ASSERT_TRUE(s.is_ok()) << name << ": " << s.message();
        s = moe_act_quant_fp8_cuda(out.p, c.rows, width, want_codes.p, want_scale.as<float>(), nullptr);
        ASSERT_TRUE(s.is_ok()) << name << ": " << s.message();
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << name;
        EXPECT_EQ(out.get<uint16_t>(static_cast<size_t>(n)), plain.get<uint16_t>(static_cast<size_t>(n))) << name;
        if (max_splits == 1) {  // one split: the blocks write the output, no combine
          EXPECT_FALSE(fc.written) << name;
          continue;
        }
        ASSERT_TRUE(fc.written) << name << ": the keys were expected to split";
        EXPECT_EQ(codes.get<uint8_t>(static_cast<size_t>(n)), want_codes.get<uint8_t>(static_cast<size_t>(n)))
            << name;
        EXPECT_EQ(scale.get<uint32_t>(static_cast<size_t>(c.rows)),
                  want_scale.get<uint32_t>(static_cast<size_t>(c.rows)))
            << name;
      }
    }
  }
}

}  // namespace attention_codes_cuda_test
}  // namespace dg
#endif
