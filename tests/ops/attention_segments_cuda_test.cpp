// The flash kernel over several sequences in one launch (attention_flash_segments_cuda) against the CPU reference
// run per sequence: each sequence has its own cache (ring or not, empty or not), its own row count (a partial
// query tile, a single row) and its own positions, at the real head shapes and a small one, bidirectional (a
// batched denoise step) and causal with a window; head dims 256 and 512 also through the wgmma blocks
// (flash_wgmma.cuh, flash_wgmma512.cuh).
// Skipped with a message when no GPU is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "core/dtype.h"
#include "ops/attention/attention_cuda.h"
#include "support/compare.h"
#include "support/seeded.h"

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include "core/cuda/cuda_check.h"

namespace dg {
namespace attention_segments_cuda_test {

struct Seq {
  int64_t rows;
  int64_t cap, from, to;  // cached positions [from, to) in a cache of `cap` slots; the rows follow at `to`
  bool ring;
};

struct Case {
  const char* name;
  int64_t heads, kv_heads, dim;
  bool causal;
  int64_t window;
  std::vector<Seq> seqs;
};

std::vector<float> rounded(size_t n, uint64_t seed, float scale, bool via_bf16) {
  std::vector<float> v = test::seeded_uniform(n, seed, -scale, scale);
  for (float& x : v) x = via_bf16 ? round_f16(round_bf16(x)) : round_f16(x);
  return v;
}

template <typename F>
void* upload(const std::vector<float>& v, F encode) {
  std::vector<uint16_t> raw(v.size());
  for (size_t i = 0; i < v.size(); ++i) raw[i] = encode(v[i]);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(raw.size(), 8) * 2), cudaSuccess);
  cudaMemcpy(p, raw.data(), raw.size() * 2, cudaMemcpyHostToDevice);
  return p;
}

void run_case(const Case& c) {
  const int64_t row = c.kv_heads * c.dim, q_row = c.heads * c.dim;
  int64_t total = 0;
  for (const Seq& s : c.seqs) total += s.rows;
  // Q and the fresh K/V of every sequence side by side, as a batched step lays them out.
  auto q = test::seeded_uniform(static_cast<size_t>(total * q_row), 31, -2.0f, 2.0f);
  for (float& x : q) x = round_bf16(x);
  const auto kf = rounded(static_cast<size_t>(total * row), 32, 1.5f, true);
  const auto vf = rounded(static_cast<size_t>(total * row), 33, 1.0f, true);
  void* dq = upload(q, f32_to_bf16);
  void* dkf = upload(kf, f32_to_f16);
  void* dvf = upload(vf, f32_to_f16);
  std::vector<float> want(static_cast<size_t>(total * q_row));
  std::vector<FlashSegment> segs;
  std::vector<void*> caches;
  int64_t row0 = 0;
  for (size_t i = 0; i < c.seqs.size(); ++i) {
    const Seq& s = c.seqs[i];
    const auto ck = rounded(static_cast<size_t>(std::max<int64_t>(s.cap, 1) * row), 40 + i, 1.5f, false);
    const auto cv = rounded(static_cast<size_t>(std::max<int64_t>(s.cap, 1) * row), 50 + i, 1.0f, false);
    const int64_t n_cached = s.to - s.from;
    std::vector<float> k(static_cast<size_t>(n_cached * row)), v(k.size());
    for (int64_t p = s.from; p < s.to; ++p) {
      const int64_t slot = s.ring ? p % s.cap : p;
      for (int64_t e = 0; e < row; ++e) {
        k[static_cast<size_t>((p - s.from) * row + e)] = ck[static_cast<size_t>(slot * row + e)];
        v[static_cast<size_t>((p - s.from) * row + e)] = cv[static_cast<size_t>(slot * row + e)];
      }
    }
    attention_cpu(q.data() + row0 * q_row, s.rows, s.to, AttnKeys{k.data(), v.data(), s.from, n_cached},
                  AttnKeys{kf.data() + row0 * row, vf.data() + row0 * row, s.to, s.rows},
                  AttnShape{c.heads, c.kv_heads, c.dim}, c.causal, c.window, Storage::kF32,
                  want.data() + row0 * q_row);
    caches.push_back(upload(ck, f32_to_f16));
    caches.push_back(upload(cv, f32_to_f16));
    segs.push_back(FlashSegment{row0, s.rows, s.to,
                                CachedKv{caches[caches.size() - 2], caches.back(), s.cap, s.ring, s.from, s.to}});
    row0 += s.rows;
  }
  void* dout = nullptr;
  ASSERT_EQ(cudaMalloc(&dout, want.size() * 2), cudaSuccess);
  // 256 or 128 output columns per 4-warp block, then the warp-pair block for head dims 256 and 512 (cols -1), then
  // the wgmma blocks for head dims 256 and 512 (cols -2).
  for (int cols : {256, 128, -1, -2}) {
    const int pairs = cols == -1 ? 256 : 0;
    const bool wgmma = cols == -2;
    if (pairs > 0 && !attention_flash_pairs(c.dim, pairs)) continue;
    const bool wgmma_dim = c.dim == 256 || c.dim == 512;  // other head dims ignore it (as attention_cuda_test)
    if (wgmma && (!wgmma_dim || !attention_flash_wgmma_available())) continue;
    ASSERT_EQ(cudaMemset(dout, 0xff, want.size() * 2), cudaSuccess);  // NaN: every output must be written
    const Status st = attention_flash_segments_cuda(dq, segs, dkf, dvf, AttnShape{c.heads, c.kv_heads, c.dim},
                                                    c.causal, c.window, dout, nullptr, cols < 0 ? 256 : cols, pairs,
                                                    wgmma);
    ASSERT_TRUE(st.is_ok()) << c.name << ": " << st.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << c.name;
    std::vector<uint16_t> raw(want.size());
    cudaMemcpy(raw.data(), dout, raw.size() * 2, cudaMemcpyDeviceToHost);
    std::vector<float> got(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) got[i] = bf16_to_f32(raw[i]);
    // The single-sequence kernel's bound (attention_cuda_test.cpp): bf16 output, f16 probabilities in P V.
    const test::Diff d = test::compare(got, want, 2e-2);
    EXPECT_TRUE(d.finite) << c.name;
    EXPECT_LE(d.max_abs, 2e-2) << c.name << " cols " << cols << " " << d.str();
    EXPECT_GE(d.cosine, 0.99995) << c.name << " cols " << cols << " " << d.str();
    std::printf("  %-34s %s max|d| %.2e cos %.7f\n", c.name,
                wgmma ? "wgmma   " : pairs ? "pairs   " : cols == 256 ? "cols 256" : "cols 128", d.max_abs, d.cosine);
  }
  for (void* p : caches) cudaFree(p);
  for (void* p : {dq, dkf, dvf, dout}) cudaFree(p);
}

TEST(AttentionFlashSegmentsCuda, EverySequenceMatchesTheCpuReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine";
  const std::vector<Seq> mixed = {{70, 32, 90, 121, true}, {20, 64, 0, 37, false}, {1, 16, 0, 0, false},
                                  {64, 48, 10, 58, true}};
  run_case({"d64 mixed canvas", 4, 2, 64, false, 0, mixed});
  run_case({"d32 mixed causal window", 4, 2, 32, true, 24, mixed});
  run_case({"real sliding, three canvases", 16, 8, 256, false, 0,
            {{256, 1023, 1000, 2023, true}, {256, 1023, 0, 300, true}, {256, 1023, 0, 0, true}}});
  run_case({"d256 odd ratio causal window, two chunks", 6, 2, 256, true, 70,
            {{150, 128, 60, 180, true}, {40, 64, 0, 0, false}}});
  run_case({"real full, two canvases", 16, 2, 512, false, 0, {{256, 1400, 0, 1100, false}, {256, 1400, 0, 513, false}}});
  run_case({"d512 causal window, three chunks", 4, 2, 512, true, 40,
            {{100, 96, 40, 100, true}, {33, 64, 0, 50, false}, {64, 1, 0, 0, false}}});
  run_case({"real full, odd canvases", 16, 2, 512, false, 0,
            {{77, 300, 150, 350, true}, {1, 64, 0, 10, false}, {130, 200, 0, 150, false}}});
}

TEST(AttentionFlashSegmentsCuda, MoreSequencesThanOneLaunchHolds) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: GPU op tests run on the GPU machine";
  std::vector<Seq> many;
  for (int i = 0; i < 53; ++i) many.push_back({1 + (i * 7) % 40, 64, 0, (i * 13) % 60, false});
  run_case({"53 sequences (two launches)", 4, 2, 16, false, 0, many});
}

TEST(AttentionFlashSegmentsCuda, RefusesWhatTheKernelCannotHold) {
  const std::vector<FlashSegment> one = {FlashSegment{0, 4, 10, CachedKv{nullptr, nullptr, 16, false, 0, 9}}};
  Status s = attention_flash_segments_cuda(nullptr, one, nullptr, nullptr, AttnShape{1, 1, 96}, false, 0, nullptr,
                                           nullptr);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("gemm"), std::string::npos) << s.message();
  s = attention_flash_segments_cuda(nullptr, one, nullptr, nullptr, AttnShape{1, 1, 64}, false, 0, nullptr, nullptr);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("not contiguous"), std::string::npos) << s.message();
}

}  // namespace attention_segments_cuda_test
}  // namespace dg
#endif
