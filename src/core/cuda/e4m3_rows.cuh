// The per-row E4M3 codes (W8A8 inputs) of a row held in registers: act_quant.cu's kernels, and the kernels that
// write a linear's input and its codes in one launch (the MoE's inputs, the norms, the gated GELU).
#pragma once

#include <cstdint>

#include "core/cuda/cuda_common.cuh"
#include "core/cuda/e4m3.cuh"

namespace dg {

// kT threads per row (a warp for the 704-wide down input, 128 threads for the 2,816-wide gate_up input), each up to
// kActPer 16-byte chunks, one read of the row and a block of rows' worth of parallelism (a warp per row left a
// 256-row call with two warps per SM: 9.8 µs on an H200).
constexpr int kActPer = 4;

// Row r's codes from its bf16 chunks held in registers: thread t of its kT holds chunks t + i kT (i < kN) in v, zeros
// past the row's end or where !live (a row past `rows`). scale[r] = amax / 448 and the E4M3 codes of each element
// divided by it. Every thread of the block calls it (kT > 32 synchronises the block); red: the block's shared
// [blockDim.x / 32] floats.
template <int kT, int kN>
__device__ __forceinline__ void act_quant_row_vals(const uint4 (&v)[kN], bool live, int64_t chunks, uint8_t* q,
                                                   float* scale, int64_t r, int t, float* red) {
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    const cuda::bf16* e = reinterpret_cast<const cuda::bf16*>(&v[i]);
#pragma unroll
    for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(__bfloat162float(e[j])));
  }
  for (int off = (kT < 32 ? kT : 32) / 2; off > 0; off >>= 1)
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  if constexpr (kT > 32) {
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = amax;
    __syncthreads();
    const int w0 = static_cast<int>(threadIdx.x) / kT * (kT / 32);
    amax = red[w0];
    for (int w = 1; w < kT / 32; ++w) amax = fmaxf(amax, red[w0 + w]);
  }
  if (!live) return;
  const float s = amax / 448.0f;
  uint2* qr = reinterpret_cast<uint2*>(q) + r * chunks;
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    const int64_t c = t + i * kT;
    if (c >= chunks) break;
    const cuda::bf16* e = reinterpret_cast<const cuda::bf16*>(&v[i]);
    uint2 o;
    auto* ob = reinterpret_cast<uint8_t*>(&o);
#pragma unroll
    for (int j = 0; j < 8; ++j) ob[j] = cuda::e4m3_of(__bfloat162float(e[j]), s);
    qr[c] = o;
  }
  if (t == 0) scale[r] = s;
}

// Row r of x (bf16 [rows, chunks * 8]) as thread t of its kT: act_quant_row_vals on the chunks t + i kT (i <
// kActPer) read from x.
template <int kT>
__device__ __forceinline__ void act_quant_row_reg(const cuda::bf16* x, int64_t rows, int64_t chunks, uint8_t* q,
                                                  float* scale, int64_t r, int t, float* red) {
  const bool live = r < rows;
  const uint4* xr = reinterpret_cast<const uint4*>(x) + r * chunks;
  uint4 v[kActPer];
#pragma unroll
  for (int i = 0; i < kActPer; ++i) {
    const int64_t c = t + i * kT;
    v[i] = live && c < chunks ? xr[c] : make_uint4(0, 0, 0, 0);
  }
  act_quant_row_vals<kT>(v, live, chunks, q, scale, r, t, red);
}

}  // namespace dg
