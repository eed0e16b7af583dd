// The synthetic weights' generator (src/model/synthetic.cpp): element i of a tensor filled from `seed` is
// offset + scale * (2u - 1) with u = (splitmix64(seed, i) >> 40) / 2^24, each f32 operation rounded on its own (no
// fused multiply-add), so the CPU backend, the CUDA kernel and scripts/full_shape_vs_hf.py (which rebuilds the
// weights in torch) give the same value bit for bit. 2u - 1 is exact; the stored weight is this value rounded to
// the storage type (bf16 on the GPU).
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace dg {

DG_HOST_DEVICE inline float synthetic_uniform(uint64_t seed, uint64_t i, float scale, float offset) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const float t = 2.0f * (static_cast<float>(z >> 40) / 16777216.0f) - 1.0f;
#if defined(__CUDA_ARCH__)
  return __fadd_rn(__fmul_rn(scale, t), offset);
#else
  volatile float m = scale * t;  // rounded to f32 before the add: no contraction into an FMA
  return m + offset;
#endif
}

}  // namespace dg

#undef DG_HOST_DEVICE
