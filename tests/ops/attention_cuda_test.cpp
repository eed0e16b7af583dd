// The CUDA attention kernels (flash, and the gemm/warp paths through the backend-level launchers) against the CPU
// reference on the same rounded inputs: canvas attention over a ring cache plus bidirectional fresh rows, causal
// prefill with a sliding window over a cache and fresh rows, and the real head shapes (256 x 8 KV heads, 512 x 2).
// Every head-dim-256 case also runs the wgmma block (flash_wgmma.cuh), in both of its forms (two heads per block
// where n_heads / n_kv is even, 128 rows of one head where it is odd), and every head-dim-512 case the wgmma block
// for 512 (flash_wgmma512.cuh). Skipped with a message when no GPU is present.
#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "ops/attention/attention_cuda.h"
#include "support/compare.h"
#include "support/seeded.h"

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include "core/cuda/cuda_check.h"

namespace dg {
namespace attention_cuda_test {

struct Case {
  const char* name;
  int64_t heads, kv_heads, dim;
  int64_t rows, n_fresh;  // query rows are the fresh rows' positions when causal
  int64_t cap, from, to;  // cached positions [from, to) in a cache of `cap` slots
  bool ring, causal;
  int64_t window;
};

const Case kCases[] = {
    {"canvas tiny", 4, 2, 16, 20, 20, 64, 0, 37, false, false, 0},
    {"canvas ring d64", 4, 2, 64, 70, 70, 32, 90, 121, true, false, 0},
    {"prefill window d32", 4, 2, 32, 150, 150, 0, 0, 0, false, true, 40},
    {"chunked prefill ring d128", 8, 2, 128, 100, 100, 48, 53, 100, true, true, 48},
    {"canvas real sliding", 16, 8, 256, 256, 256, 1023, 1000, 2023, true, false, 0},
    {"canvas real full", 16, 2, 512, 256, 256, 1400, 0, 1100, false, false, 0},
    {"prefill real full", 16, 2, 512, 300, 300, 0, 0, 0, false, true, 0},
    {"chunked prefill window d512", 4, 2, 512, 150, 150, 96, 40, 100, true, true, 40},
    {"canvas ring d512 odd tail", 8, 2, 512, 77, 77, 64, 130, 193, true, false, 0},
    {"chunked prefill ring window d256", 8, 4, 256, 130, 130, 100, 150, 250, true, true, 100},
    {"prefill window d256", 16, 8, 256, 300, 300, 0, 0, 0, false, true, 128},
    {"canvas d256 cache only", 16, 8, 256, 40, 0, 300, 20, 270, false, false, 0},
    {"canvas ring d256 odd ratio", 4, 4, 256, 150, 150, 64, 10, 70, true, false, 0},
    {"prefill window d256 ratio 3", 6, 2, 256, 200, 200, 0, 0, 0, false, true, 50},
    // Head dim 512: 30 key tiles (the last of 54 keys) over a wrapped ring for one row tile, so up to 16 splits
    // leave several; no fresh keys; ratio 3 in a causal chunk of 130 rows (two whole row tiles and 2 rows).
    {"canvas ring d512 many splits", 16, 2, 512, 20, 20, 2048, 300, 2190, true, false, 0},
    {"canvas d512 cache only", 16, 2, 512, 40, 0, 300, 20, 270, false, false, 0},
    {"chunked prefill d512 ratio 3", 6, 2, 512, 130, 130, 400, 0, 270, false, true, 0},
};

// A launch configuration: key splits (canvas only), output columns per 4-warp block, the head dims that run the
// warp-pair block instead (0: none), and the wgmma blocks for head dims 256 and 512.
struct Launch {
  int max_splits, cols, pairs;
  bool wgmma;
};
const Launch kLaunches[] = {{1, 256, 0, false},   {16, 256, 0, false}, {16, 128, 0, false}, {1, 256, 256, false},
                            {16, 256, 256, false}, {1, 256, 0, true},   {16, 256, 0, true}};

std::vector<float> uniform(size_t n, uint64_t seed, float scale) {
  return test::seeded_uniform(n, seed, -scale, scale);
}

template <typename F>
std::vector<uint16_t> encode(const std::vector<float>& v, F f) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f(v[i]);
  return out;
}

void* upload(const std::vector<uint16_t>& v) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(v.size(), 8) * 2), cudaSuccess);
  cudaMemcpy(p, v.data(), v.size() * 2, cudaMemcpyHostToDevice);
  return p;
}

TEST(AttentionFlashCuda, MatchesTheCpuReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine";
  const bool wgmma_ok = attention_flash_wgmma_available();
  if (!wgmma_ok) std::printf("  (no sm_90a code for this device: the wgmma launches are skipped)\n");
  for (const Case& c : kCases) {
    const int64_t row = c.kv_heads * c.dim, n_cached = c.to - c.from;
    // Q, fresh K/V bf16-representable; the cache f16-representable; the CPU sees exactly the GPU's inputs.
    auto q = uniform(static_cast<size_t>(c.rows * c.heads * c.dim), 11, 2.0f);
    auto kf = uniform(static_cast<size_t>(c.n_fresh * row), 12, 1.5f);
    auto vf = uniform(static_cast<size_t>(c.n_fresh * row), 13, 1.0f);
    auto cache_k = uniform(static_cast<size_t>(std::max<int64_t>(c.cap, 1) * row), 14, 1.5f);
    auto cache_v = uniform(static_cast<size_t>(std::max<int64_t>(c.cap, 1) * row), 15, 1.0f);
    for (float& x : q) x = round_bf16(x);
    for (float& x : kf) x = round_f16(round_bf16(x));
    for (float& x : vf) x = round_f16(round_bf16(x));
    for (float& x : cache_k) x = round_f16(x);
    for (float& x : cache_v) x = round_f16(x);

    std::vector<float> ck(static_cast<size_t>(n_cached * row)), cv(ck.size());
    for (int64_t p = c.from; p < c.to; ++p) {
      const int64_t slot = c.ring ? p % c.cap : p;
      for (int64_t e = 0; e < row; ++e) {
        ck[static_cast<size_t>((p - c.from) * row + e)] = cache_k[static_cast<size_t>(slot * row + e)];
        cv[static_cast<size_t>((p - c.from) * row + e)] = cache_v[static_cast<size_t>(slot * row + e)];
      }
    }
    const int64_t pos0 = c.to;  // fresh rows (and the queries) follow the cache
    std::vector<float> want(static_cast<size_t>(c.rows * c.heads * c.dim));
    const AttnShape shape{c.heads, c.kv_heads, c.dim};
    attention_cpu(q.data(), c.rows, pos0, AttnKeys{ck.data(), cv.data(), c.from, n_cached},
                  AttnKeys{kf.data(), vf.data(), pos0, c.n_fresh}, shape, c.causal, c.window, Storage::kF32,
                  want.data());

    void* dq = upload(encode(q, f32_to_bf16));
    void* dkf = upload(encode(kf, f32_to_f16));
    void* dvf = upload(encode(vf, f32_to_f16));
    void* dck = upload(encode(cache_k, f32_to_f16));
    void* dcv = upload(encode(cache_v, f32_to_f16));
    void* dout = nullptr;
    ASSERT_EQ(cudaMalloc(&dout, want.size() * 2), cudaSuccess);
    const CachedKv cached{dck, dcv, c.cap, c.ring, c.from, c.to};
    for (const auto& [max_splits, cols, pairs, wgmma] : kLaunches) {
      if (pairs > 0 && !attention_flash_pairs(c.dim, pairs)) continue;  // the same launch as pairs 0
      if (wgmma && ((c.dim != 256 && c.dim != 512) || !wgmma_ok)) continue;  // other head dims ignore it
      ASSERT_EQ(cudaMemset(dout, 0xff, want.size() * 2), cudaSuccess);  // NaN: every output must be written
      const Status s = attention_flash_cuda(dq, c.rows, pos0, cached, dkf, dvf, c.n_fresh, pos0, shape, c.causal,
                                            c.window, dout, nullptr, max_splits, cols, pairs, wgmma);
      ASSERT_TRUE(s.is_ok()) << c.name << ": " << s.message();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << c.name;
      std::vector<uint16_t> raw(want.size());
      cudaMemcpy(raw.data(), dout, raw.size() * 2, cudaMemcpyDeviceToHost);
      std::vector<float> got(raw.size());
      for (size_t i = 0; i < raw.size(); ++i) got[i] = bf16_to_f32(raw[i]);
      // Output rounded to bf16 (2^-9 relative) and probabilities to f16 inside P V: a few bf16 ulps of |out| <= 1.
      const test::Diff d = test::compare(got, want, 2e-2);
      EXPECT_TRUE(d.finite) << c.name;
      const std::string how = " splits " + std::to_string(max_splits) + " cols " + std::to_string(cols) +
                              " pairs " + std::to_string(pairs) + (wgmma ? " wgmma " : " ");
      EXPECT_LE(d.max_abs, 2e-2) << c.name << how << d.str();
      EXPECT_GE(d.cosine, 0.99995) << c.name << how << d.str();
      std::printf("  %-32s splits<=%-2d cols %d pairs %d%s max|d| %.2e cos %.7f\n", c.name, max_splits, cols, pairs,
                  wgmma ? " wgmma" : "", d.max_abs, d.cosine);
    }
    for (void* p : {dq, dkf, dvf, dck, dcv, dout}) cudaFree(p);
  }
}

TEST(AttentionFlashCuda, RefusesHeadDimsItDoesNotCover) {
  EXPECT_FALSE(attention_flash_supports(8));
  EXPECT_FALSE(attention_flash_supports(96));
  EXPECT_TRUE(attention_flash_supports(256));
  const Status s = attention_flash_cuda(nullptr, 1, 0, CachedKv{}, nullptr, nullptr, 1, 0, AttnShape{1, 1, 96}, true,
                                        0, nullptr, nullptr);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("gemm"), std::string::npos) << s.message();
  const Status cols = attention_flash_cuda(nullptr, 1, 0, CachedKv{}, nullptr, nullptr, 1, 0, AttnShape{1, 1, 256},
                                           true, 0, nullptr, nullptr, 16, 64);
  EXPECT_FALSE(cols.is_ok());
  EXPECT_NE(cols.message().find("128 or 256"), std::string::npos) << cols.message();
}

// A ring holds at most its capacity of cached keys (the kernels wrap a slot at most once), and the error says so.
TEST(AttentionFlashCuda, RefusesMoreCachedKeysThanTheRingHolds) {
  const CachedKv over{nullptr, nullptr, 10, true, 5, 16};
  const Status s = attention_flash_cuda(nullptr, 1, 16, over, nullptr, nullptr, 1, 16, AttnShape{1, 1, 64}, false, 0,
                                        nullptr, nullptr);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("11 cached keys do not fit a ring of 10"), std::string::npos) << s.message();
  const std::vector<FlashSegment> one = {FlashSegment{0, 1, 16, over}};
  const Status seg = attention_flash_segments_cuda(nullptr, one, nullptr, nullptr, AttnShape{1, 1, 64}, false, 0,
                                                   nullptr, nullptr);
  EXPECT_FALSE(seg.is_ok());
  EXPECT_NE(seg.message().find("do not fit a ring of 10"), std::string::npos) << seg.message();
}

// Where the wgmma block cannot run (no GPU, not Hopper, no sm_90a code) asking for it is an error that says so,
// never a silent fallback; head dims other than 256 and 512 are not affected by the option.
TEST(AttentionFlashCuda, WgmmaRefusedWhereItCannotRun) {
  const Status other = attention_flash_cuda(nullptr, 1, 0, CachedKv{}, nullptr, nullptr, 1, 0, AttnShape{1, 1, 96},
                                            true, 0, nullptr, nullptr, 16, 256, 0, true);
  EXPECT_FALSE(other.is_ok());
  EXPECT_NE(other.message().find("gemm"), std::string::npos) << other.message();
  if (attention_flash_wgmma_available()) GTEST_SKIP() << "this device runs the wgmma block";
  EXPECT_FALSE(attention_flash_wgmma_check("here").is_ok());
  const Status s = attention_flash_cuda(nullptr, 1, 0, CachedKv{}, nullptr, nullptr, 1, 0, AttnShape{16, 8, 256}, true,
                                        0, nullptr, nullptr, 16, 256, 0, true);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("--attention-wgmma needs an sm_90a build and a Hopper GPU"), std::string::npos)
      << s.message();
  const Status full = attention_flash_cuda(nullptr, 1, 0, CachedKv{}, nullptr, nullptr, 1, 0, AttnShape{16, 2, 512},
                                           true, 0, nullptr, nullptr, 16, 256, 512, true);
  EXPECT_FALSE(full.is_ok());
  EXPECT_NE(full.message().find("sm_90a"), std::string::npos) << full.message();
  const std::vector<FlashSegment> one = {FlashSegment{0, 4, 10, CachedKv{}}};
  const Status seg = attention_flash_segments_cuda(nullptr, one, nullptr, nullptr, AttnShape{16, 8, 256}, false, 0,
                                                   nullptr, nullptr, 256, 0, true);
  EXPECT_FALSE(seg.is_ok());
  EXPECT_NE(seg.message().find("sm_90a"), std::string::npos) << seg.message();
  const Status seg512 = attention_flash_segments_cuda(nullptr, one, nullptr, nullptr, AttnShape{16, 2, 512}, false, 0,
                                                      nullptr, nullptr, 256, 512, true);
  EXPECT_FALSE(seg512.is_ok());
  EXPECT_NE(seg512.message().find("sm_90a"), std::string::npos) << seg512.message();
}

}  // namespace attention_cuda_test
}  // namespace dg
#endif
