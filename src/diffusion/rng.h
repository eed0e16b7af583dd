// The canvas RNG (the seed's contract, SPEC.md decisions table): a 64-bit LCG,
// state = state * 6966169279 + 1039523323 (mod 2^64), each draw advances the state and returns its high 32 bits.
// Lcg(seed) starts at state seed + 1. Uniform floats are u32 / 2^32 (as doubles); ids in [0, n) are (u32 * n) >> 32.
// scripts/make_fixtures.py implements the same stream to record reference generations.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/decide/decide.h"

namespace dg {

class Lcg {
 public:
  static constexpr uint64_t kMul = 6966169279ull, kAdd = 1039523323ull;
  explicit Lcg(uint64_t seed) : state_(seed + 1) {}
  uint32_t next_u32() {
    state_ = state_ * kMul + kAdd;
    return static_cast<uint32_t>(state_ >> 32);
  }
  double uniform() { return static_cast<double>(next_u32()) / 4294967296.0; }
  int32_t randint(int64_t n) { return static_cast<int32_t>((static_cast<uint64_t>(next_u32()) * static_cast<uint64_t>(n)) >> 32); }
  uint64_t state() const { return state_; }
  void discard(int64_t n) {
    for (int64_t i = 0; i < n; ++i) next_u32();
  }
  // The affine maps of 1..n draws (the decide op's per-row draws, src/ops/decide/decide.h).
  static std::vector<LcgJump> jumps(int n) {
    std::vector<LcgJump> t(static_cast<size_t>(n));
    LcgJump j;
    for (LcgJump& e : t) {
      j = LcgJump{j.mul * kMul, j.add * kMul + kAdd};
      e = j;
    }
    return t;
  }

 private:
  uint64_t state_;
};

// `n` ids in [3, vocab) (no special tokens) from the LCG seeded with `seed`: the prompts and canvases of the
// benchmarks and the full-shape comparisons.
inline std::vector<int32_t> synthetic_ids(int64_t n, int64_t vocab, uint64_t seed) {
  Lcg rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& t : ids) t = 3 + rng.randint(vocab - 3);
  return ids;
}

}  // namespace dg
