// Device-side helpers shared by the CUDA kernels: dtype conversions that round like the host codecs
// (round-to-nearest-even), warp reductions, and launch-size arithmetic.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace dg::cuda {

using bf16 = __nv_bfloat16;
using f16 = __half;

template <typename T> __device__ __forceinline__ float to_f32(T v);
template <> __device__ __forceinline__ float to_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_f32<bf16>(bf16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ float to_f32<f16>(f16 v) { return __half2float(v); }

template <typename T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ bf16 from_f32<bf16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ f16 from_f32<f16>(float v) { return __float2half_rn(v); }

// f32 -> bf16 -> f32: the rounding a bf16 activation store applies.
__device__ __forceinline__ float rbf(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

// gelu_pytorch_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
__device__ __forceinline__ float gelu_tanh(float x) {
  const float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(inner));
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// The largest v over the warp, the lowest i among equal v winning; every lane gets the pair (where no v is NaN).
__device__ __forceinline__ void warp_argmax(float& v, int& i) {
  for (int off = 16; off > 0; off >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, off);
    const int oi = __shfl_xor_sync(0xffffffffu, i, off);
    if (ov > v || (ov == v && oi < i)) {
      v = ov;
      i = oi;
    }
  }
}

// The max (is_max) or the sum of v over a block of kThreads threads, returned to every thread; sh: kThreads / 32
// floats of shared memory. Two barriers: the block may reuse sh after it returns.
template <int kThreads>
__device__ float block_reduce(float v, bool is_max, float* sh) {
  for (int off = 16; off > 0; off >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = is_max ? -INFINITY : 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) t = is_max ? fmaxf(t, sh[w]) : t + sh[w];
  __syncthreads();
  return t;
}

inline unsigned blocks_for(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

// Streaming multiprocessors of the current device (read once).
inline int sm_count() {
  static const int n = [] {
    int dev = 0, v = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev);
    return v > 0 ? v : 1;
  }();
  return n;
}

// A kernel's resident blocks per SM at `threads` and `smem` bytes of dynamic shared memory (at least 1; 1 when the
// runtime cannot say, whose error is then cleared).
template <class Kernel>
int resident_per_sm(Kernel kernel, int threads, size_t smem) {
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem) != cudaSuccess) {
    n = 1;
    (void)cudaGetLastError();
  }
  return n < 1 ? 1 : n;
}

// A thread's strided walk of a row in 16-byte vectors: calls take(vector, index) for index = first, first + step,
// ... below end, in that order, with kLoads loads in flight before any is taken (the last fewer than kLoads one at a
// time). The order is a one-load loop's, so the kernels' sums do not depend on kLoads. Vec: float4 or uint4; `row`
// and every index 16-byte aligned.
template <int kLoads, typename Vec, typename T, typename Take>
__device__ __forceinline__ void for_loads(const T* row, int64_t first, int64_t end, int64_t step, Take take) {
  int64_t v = first;
  for (; v + (kLoads - 1) * step < end; v += kLoads * step) {
    Vec q[kLoads];
#pragma unroll
    for (int k = 0; k < kLoads; ++k) q[k] = *reinterpret_cast<const Vec*>(row + v + k * step);
#pragma unroll
    for (int k = 0; k < kLoads; ++k) take(q[k], v + k * step);
  }
  for (; v < end; v += step) take(*reinterpret_cast<const Vec*>(row + v), v);
}

}  // namespace dg::cuda
