#include "support/seeded.h"

#include "core/parallel.h"
#include "ops/elementwise/synthetic_uniform.h"

namespace dg::test {

std::vector<float> seeded_uniform(size_t n, uint64_t seed, float lo, float hi, Storage round) {
  std::vector<float> v(n);
  const float mid = 0.5f * (lo + hi), half = 0.5f * (hi - lo);
  parallel_for(static_cast<int64_t>(n), 1 << 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      v[static_cast<size_t>(i)] = round_to(round, synthetic_uniform(seed, static_cast<uint64_t>(i), half, mid));
  });
  return v;
}

std::vector<uint16_t> seeded_uniform_bf16(size_t n, uint64_t seed, float lo, float hi) {
  const std::vector<float> f = seeded_uniform(n, seed, lo, hi);
  std::vector<uint16_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = f32_to_bf16(f[i]);
  return v;
}

double seeded_unit(uint64_t seed, uint64_t i) {
  return 0.5 * (static_cast<double>(synthetic_uniform(seed, i, 1.0f, 0.0f)) + 1.0);  // [-1, 1) -> [0, 1)
}

std::vector<int32_t> seeded_ids(size_t n, uint64_t seed, int32_t lo, int32_t hi) {
  std::vector<int32_t> v(n);
  const double span = static_cast<double>(hi - lo);
  for (size_t i = 0; i < n; ++i) {
    const auto k = static_cast<int32_t>(seeded_unit(seed, i) * span);
    v[i] = lo + (k < hi - lo ? k : hi - lo - 1);
  }
  return v;
}

}  // namespace dg::test
