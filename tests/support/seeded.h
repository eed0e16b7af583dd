// Seeded test inputs, the same on every machine: element i of a draw from `seed` is synthetic_uniform(seed, i, ...)
// (src/ops/elementwise/synthetic_uniform.h, a counter-based hash), so an input does not depend on the order or the
// thread that fills it. Values are uniform in [lo, hi], optionally rounded to a storage type so that every backend
// of a comparison reads exactly the same numbers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace dg::test {

// n values uniform in [lo, hi] from `seed`, rounded through `round` (f32: as drawn).
std::vector<float> seeded_uniform(size_t n, uint64_t seed, float lo, float hi, Storage round = Storage::kF32);
// The same values as bf16 bit patterns.
std::vector<uint16_t> seeded_uniform_bf16(size_t n, uint64_t seed, float lo, float hi);
// n ids uniform in [lo, hi) from `seed`.
std::vector<int32_t> seeded_ids(size_t n, uint64_t seed, int32_t lo, int32_t hi);
// A draw from [0, 1) for index i of `seed` (one value, for hand-placed choices).
double seeded_unit(uint64_t seed, uint64_t i);

}  // namespace dg::test
