// The row bodies of the bf16 RMSNorm kernels, shared by the kernels that end in one: a row normed by one warp
// (rmsnorm_warp_kernel in rmsnorm.cu, the attention heads' fused norm in heads_norm.cu) or by one block (the
// hidden-size norms: rmsnorm_vec_kernel, and the router's input in src/ops/moe/moe.cu). 16-byte loads held in
// registers, the sum of squares in a fixed order, the normed values rounded to bf16 (as stored).
#pragma once

#include "core/cuda/cuda_common.cuh"

namespace dg::norm {

constexpr int kWarpMaxDim = 1024, kWarpVecs = kWarpMaxDim / 256;
constexpr int kVecThreads = 128, kVecPer = 4, kVecMaxDim = 8 * kVecThreads * kVecPer;

// Eight consecutive bf16 or f32 values as floats (16-byte aligned: one or two vector loads).
__device__ __forceinline__ void load8(const cuda::bf16* p, float (&out)[8]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const cuda::bf16* e = reinterpret_cast<const cuda::bf16*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = __bfloat162float(e[i]);
}
__device__ __forceinline__ void load8(const float* p, float (&out)[8]) {
  const float4 a = *reinterpret_cast<const float4*>(p), b = *reinterpret_cast<const float4*>(p + 4);
  out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w, out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
}

// A W8A8 product's raw sums read by a norm: each value times `row` (the input row's scale), then col[d] (the weight
// row's scale of column d; 16-byte aligned), in f32, before the norm. col null: the values as stored.
struct RawScales {
  float row = 1.0f;
  const float* col = nullptr;
};

// Row xr of `dim` bf16 (a multiple of 8 up to kWarpMaxDim; 16 for rope; 16-byte aligned), scaled as `raw` says,
// times rsqrt(mean square + eps) and the weight w (null: none) into yr. With kMayRope and rope, rotated at `pos` by
// inv_freq [dim / 2], or by the row's entries of rope_table_cuda's table when `rot` is set (the same rounded cos and
// sin, read, not computed); `normed` is the warp's shared [kWarpMaxDim] floats (unused otherwise). y16 (16-byte
// aligned, or null): the bf16 results again as f16, each converted from its bf16 value.
template <bool kMayRope>
__device__ __forceinline__ void warp_norm_row(const cuda::bf16* __restrict__ xr, const cuda::bf16* __restrict__ w,
                                              cuda::bf16* __restrict__ yr, int dim, float eps, bool rope, float pos,
                                              const float* __restrict__ inv_freq, float* normed,
                                              const __nv_bfloat162* __restrict__ rot = nullptr,
                                              __half* __restrict__ y16 = nullptr, RawScales raw = {}) {
  const int lane = threadIdx.x & 31;
  rope = kMayRope && rope;
  float v[kWarpVecs][8];
  float ss = 0.0f;
#pragma unroll
  for (int s = 0; s < kWarpVecs; ++s) {
    const int d0 = 8 * (lane + 32 * s);
    if (d0 >= dim) continue;
    load8(xr + d0, v[s]);
    if (raw.col != nullptr) {
      float cs[8];
      load8(raw.col + d0, cs);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[s][i] = v[s][i] * raw.row * cs[i];
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) ss += v[s][i] * v[s][i];
  }
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  const float inv = rsqrtf(ss / static_cast<float>(dim) + eps);
#pragma unroll
  for (int s = 0; s < kWarpVecs; ++s) {
    const int d0 = 8 * (lane + 32 * s);
    if (d0 >= dim) continue;
    float wv[8] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
    if (w != nullptr) load8(w + d0, wv);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      float n = v[s][i] * inv;
      if (w != nullptr) n *= wv[i];
      v[s][i] = cuda::rbf(n);
      if (kMayRope && rope) normed[d0 + i] = v[s][i];
    }
  }
  if (kMayRope && rope) {
    __syncwarp();
    const int half = dim / 2;
#pragma unroll
    for (int s = 0; s < kWarpVecs; ++s) {
      const int d0 = 8 * (lane + 32 * s);
      if (d0 >= dim) continue;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int d = d0 + i, j = d < half ? d : d - half;
        float sn, c;
        if (rot != nullptr) {
          const float2 cs = __bfloat1622float2(rot[j]);
          c = cs.x;
          sn = cs.y;
        } else {
          sincosf(pos * inv_freq[j], &sn, &c);
          c = cuda::rbf(c);
          sn = cuda::rbf(sn);
        }
        const float a = normed[j], b = normed[j + half];
        v[s][i] = d < half ? cuda::rbf(a * c) + cuda::rbf(-b * sn) : cuda::rbf(b * c) + cuda::rbf(a * sn);
      }
    }
  }
#pragma unroll
  for (int s = 0; s < kWarpVecs; ++s) {
    const int d0 = 8 * (lane + 32 * s);
    if (d0 >= dim) continue;
    uint4 raw;
    cuda::bf16* e = reinterpret_cast<cuda::bf16*>(&raw);
#pragma unroll
    for (int i = 0; i < 8; ++i) e[i] = __float2bfloat16_rn(v[s][i]);
    *reinterpret_cast<uint4*>(yr + d0) = raw;
    if (y16 != nullptr) {
      uint4 raw16;
      __half* h = reinterpret_cast<__half*>(&raw16);
#pragma unroll
      for (int i = 0; i < 8; ++i) h[i] = __float2half_rn(__bfloat162float(e[i]));
      *reinterpret_cast<uint4*>(y16 + d0) = raw16;
    }
  }
}

// The sum of squares of a row of `dim` values held in shared memory (f32 of the stored bf16 row, a multiple of 8
// up to kVecMaxDim) in the order the hidden-size norm kernels sum it: rows of up to kWarpMaxDim as warp_norm_row
// (lane l over chunks l + 32 s, a butterfly), wider ones as vec_norm_row (thread t < kVecThreads over chunks
// t + kVecThreads s, a butterfly, the warps' sums in order). So a kernel that holds the row another way gets their
// inverse RMS bit for bit. Every thread of the block calls it and gets the total; warp_sums: the block's shared
// [kVecThreads / 32] floats, free again when it returns.
__device__ __forceinline__ float row_sum_squares(const float* row, int dim, float* warp_sums) {
  const int t = static_cast<int>(threadIdx.x), lane = t & 31;
  const bool warp_row = dim <= kWarpMaxDim;
  const int threads = warp_row ? 32 : kVecThreads, per = warp_row ? kWarpVecs : kVecPer;
  if (t < threads) {
    float ss = 0.0f;
    for (int s = 0; s < per; ++s) {
      const int d0 = 8 * (t + threads * s);
      if (d0 >= dim) continue;
#pragma unroll
      for (int i = 0; i < 8; ++i) ss += row[d0 + i] * row[d0 + i];
    }
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    if (lane == 0) warp_sums[t >> 5] = ss;
  }
  __syncthreads();
  float total = warp_sums[0];
  if (!warp_row) {
    total = 0.0f;
#pragma unroll
    for (int k = 0; k < kVecThreads / 32; ++k) total += warp_sums[k];
  }
  __syncthreads();
  return total;
}

struct NoPrefetch {
  __device__ void operator()(int, int) const {}
};

// One block of kVecThreads: row xr of `dim` bf16 (a multiple of 8 up to kVecMaxDim, 16-byte aligned) times rsqrt(mean
// square + eps) and the weight w (bf16 or f32, 16-byte aligned; null: none), rounded to bf16; store(s, d0, raw) gets
// each 16-byte chunk of eight outputs, elements [d0, d0 + 8) (d0 = 8 (thread + kVecThreads s)). The row and the
// weight are loaded before the sum, with whatever prefetch(s, d0) loads for the caller's use in store (both are called
// with s a compile-time constant once unrolled, so the caller's arrays indexed by s stay in registers). warp_sums:
// the block's shared [kVecThreads / 32].
template <typename TW, typename Store, typename Prefetch = NoPrefetch>
__device__ __forceinline__ void vec_norm_row(const cuda::bf16* __restrict__ xr, const TW* __restrict__ w, int dim,
                                             float eps, float* warp_sums, Store store, Prefetch prefetch = {}) {
  float v[kVecPer][8], wv[kVecPer][8];
  float ss = 0.0f;
#pragma unroll
  for (int s = 0; s < kVecPer; ++s) {
    const int d0 = 8 * (static_cast<int>(threadIdx.x) + kVecThreads * s);
    if (d0 >= dim) continue;
    load8(xr + d0, v[s]);
    if (w != nullptr) load8(w + d0, wv[s]);
    prefetch(s, d0);
#pragma unroll
    for (int i = 0; i < 8; ++i) ss += v[s][i] * v[s][i];
  }
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = ss;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int k = 0; k < kVecThreads / 32; ++k) total += warp_sums[k];
  const float inv = rsqrtf(total / static_cast<float>(dim) + eps);
#pragma unroll
  for (int s = 0; s < kVecPer; ++s) {
    const int d0 = 8 * (static_cast<int>(threadIdx.x) + kVecThreads * s);
    if (d0 >= dim) continue;
    uint4 raw;
    cuda::bf16* e = reinterpret_cast<cuda::bf16*>(&raw);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      float n = v[s][i] * inv;
      if (w != nullptr) n *= wv[s][i];
      e[i] = __float2bfloat16_rn(n);
    }
    store(s, d0, raw);
  }
}

}  // namespace dg::norm
