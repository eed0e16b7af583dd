// What the self-conditioning passes share (self_cond.cu, survivors.cu): rows cut into slices over blocks
// (soft_probs_slices), each slice's running (max, sum of exp) pair, and a row's pairs merged in slice order.
#pragma once

#include <cstdint>

#include "core/cuda/cuda_common.cuh"
#include "ops/self_cond/self_cond_cuda.h"

namespace dg::soft {

using bf16_t = cuda::bf16;

constexpr int kThreads = 256;

// A running (max, sum of exp(x - max)) pair: merging two rescales the sum of the smaller max.
struct MaxSum {
  float m, s;
};
__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0f};
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

// Row blockIdx.x's pairs (blockIdx.y's siblings) merged in slice order by thread 0 into `shared`; every thread gets
// the row's pair (the same in every block of the row). The whole block calls it.
__device__ __forceinline__ MaxSum row_stat(const MaxSum* part, MaxSum& shared) {
  if (threadIdx.x == 0) {
    MaxSum t = part[blockIdx.x * gridDim.y];
    for (unsigned j = 1; j < gridDim.y; ++j) t = merge(t, part[blockIdx.x * gridDim.y + j]);
    shared = t;
  }
  __syncthreads();
  return shared;
}

// A token's probability as every pass rounds it: bf16(e^(x - max) / sum), with inv = 1 / sum (the twin rounds the
// f32 softmax to the activation storage alike).
__device__ __forceinline__ float prob(bf16_t x, float mx, float inv) {
  return cuda::rbf(expf(__bfloat162float(x) - mx) * inv);
}

// The grid of the passes: a block per (row, slice); slices are multiples of 8 entries (16-byte loads stay aligned).
struct Slices {
  dim3 grid;
  int64_t slice;
};
inline Slices slices(int64_t rows, int64_t vocab) {
  const int64_t n = soft_probs_slices(rows, vocab);
  const int64_t slice = ((vocab + n - 1) / n + 7) / 8 * 8;
  return {dim3(static_cast<unsigned>(rows), static_cast<unsigned>((vocab + slice - 1) / slice)), slice};
}

}  // namespace dg::soft
