// The synthetic weights' generator (src/ops/elementwise/synthetic_uniform.h): golden values shared with
// scripts/full_shape_vs_hf.py (its --selftest holds the same table and checksum, so the torch rebuild of the
// full-shape weights is checked against the C++ formula bit for bit), the CPU backend's fill, and the CUDA kernel
// against its CPU twin (skipped without a GPU).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <vector>

#include "backend/registry.h"
#include "backend/synthetic_fill.h"
#include "core/dtype.h"
#include "ops/elementwise/synthetic_uniform.h"

#if defined(DG_WITH_CUDA)
#include "core/cuda/cuda_check.h"
#endif

namespace dg {
namespace synthetic_uniform_test {

struct Golden {
  uint64_t seed, index;
  uint32_t scale_bits, offset_bits, value_bits;
  uint16_t bf16_bits;
};

// Keep in sync with GOLDEN in scripts/full_shape_vs_hf.py. Scales are synthetic.cpp's: 0.8·√3 (embedding),
// 0.3·√3 + 1 (norms), 0.1·√3 + 0.5 (q/k norms), 0.15·√3 (experts), √3/√2816 (linears), 0.5 + 1,
// 3·√3 (router).
const Golden kGolden[] = {
    {7000022ull, 0ull, 0x3fb15cacu, 0x00000000u, 0x3f73bb63u, 0x3f74u},
    {7000022ull, 1ull, 0x3fb15cacu, 0x00000000u, 0xbf859284u, 0xbf86u},
    {7000022ull, 738197503ull, 0x3fb15cacu, 0x00000000u, 0xbfa28547u, 0xbfa3u},
    {7000023ull, 5ull, 0x3f050581u, 0x3f800000u, 0x3f403d11u, 0x3f40u},
    {7000040ull, 123456789ull, 0x3e315cacu, 0x3f000000u, 0x3f190fbdu, 0x3f19u},
    {7000051ull, 507510783ull, 0x3e850581u, 0x00000000u, 0xbe2a5a59u, 0xbe2au},
    {1ull, 0ull, 0x3d05b10fu, 0x00000000u, 0x3cccfb56u, 0x3ccdu},
    {18446744073709551615ull, 4294967297ull, 0x3f000000u, 0x3f800000u, 0x3f8f75a6u, 0x3f8fu},
    {42ull, 99ull, 0x40a646e1u, 0x00000000u, 0xc092f862u, 0xc093u},
};

TEST(SyntheticUniform, GoldenValuesSharedWithThePythonRebuild) {
  const float sqrt3 = std::sqrt(3.0f);
  EXPECT_EQ(std::bit_cast<uint32_t>(0.8f * sqrt3), 0x3fb15cacu);  // the scales as synthetic.cpp computes them
  EXPECT_EQ(std::bit_cast<uint32_t>(sqrt3 / std::sqrt(2816.0f)), 0x3d05b10fu);
  for (const Golden& g : kGolden) {
    const float v = synthetic_uniform(g.seed, g.index, std::bit_cast<float>(g.scale_bits),
                                      std::bit_cast<float>(g.offset_bits));
    EXPECT_EQ(std::bit_cast<uint32_t>(v), g.value_bits) << "seed " << g.seed << " index " << g.index;
    EXPECT_EQ(f32_to_bf16(v), g.bf16_bits) << "seed " << g.seed << " index " << g.index;
  }
  // A norm-shaped range (offset 1: the add rounds), as a polynomial hash of the bits; same in the python selftest.
  uint64_t f32_hash = 0, bf16_hash = 0;
  for (uint64_t i = 0; i < 65536; ++i) {
    const float v = synthetic_uniform(7000023ull, i, 0.3f * sqrt3, 1.0f);
    f32_hash = f32_hash * 31 + std::bit_cast<uint32_t>(v);
    bf16_hash = bf16_hash * 31 + f32_to_bf16(v);
  }
  EXPECT_EQ(f32_hash, 6349766367449722920ull);
  EXPECT_EQ(bf16_hash, 8835359783252537510ull);
}

TEST(SyntheticUniform, CpuBackendStoresTheValuesRoundedToItsStorage) {
  auto cpu = make_backend("cpu", BackendOptions{Precision{Storage::kBF16, Storage::kF16}});
  Tensor t = cpu->alloc(Shape{3, 1001});
  synthetic_fill(*cpu).fill_uniform(t, 9, 0.25f, 0.5f);
  for (int64_t i = 0; i < t.numel(); ++i)
    ASSERT_EQ(t.f32()[i], round_bf16(synthetic_uniform(9, static_cast<uint64_t>(i), 0.25f, 0.5f))) << i;
  auto f32 = make_backend("cpu");
  Tensor u = f32->alloc(Shape{5, 7});
  synthetic_fill(*f32).fill_uniform(u, 3, 2.0f, 0.0f);
  for (int64_t i = 0; i < u.numel(); ++i) {
    ASSERT_EQ(u.f32()[i], synthetic_uniform(3, static_cast<uint64_t>(i), 2.0f, 0.0f)) << i;
    ASSERT_LT(std::fabs(u.f32()[i]), 2.0f);
  }
}

#if defined(DG_WITH_CUDA)
TEST(SyntheticUniformCuda, KernelMatchesTheCpuTwinBitForBit) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  auto gpu = make_backend("cuda");
  auto cpu = make_backend("cpu", BackendOptions{Precision{Storage::kBF16, Storage::kF16}});
  const float sqrt3 = std::sqrt(3.0f);
  for (const float offset : {0.0f, 1.0f, 0.5f}) {
    Tensor d = gpu->alloc(Shape{1031, 1409}), h = cpu->alloc(Shape{1031, 1409});
    synthetic_fill(*gpu).fill_uniform(d, 7000023ull, 0.3f * sqrt3, offset);
    synthetic_fill(*cpu).fill_uniform(h, 7000023ull, 0.3f * sqrt3, offset);
    std::vector<float> got(static_cast<size_t>(d.numel()));
    gpu->copy_to_host(d, got.data());
    for (int64_t i = 0; i < d.numel(); ++i)
      ASSERT_EQ(got[static_cast<size_t>(i)], h.f32()[i]) << "offset " << offset << " index " << i;
  }
}
#endif

}  // namespace synthetic_uniform_test
}  // namespace dg
