#include <algorithm>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/e4m3.cuh"
#include "core/cuda/launch.cuh"
#include "ops/self_cond/self_cond_cuda.h"
#include "ops/self_cond/soft_slices.cuh"

namespace dg {
namespace {

using cuda::bf16;
using soft::kThreads;
using soft::MaxSum;
using soft::merge;


// kLoads: 16-byte loads each thread keeps in flight (CudaKernels::soft_probs_loads; cuda::for_loads: the same
// order, so the same sums and bits either way). One at a time left these passes waiting on memory, 60-66 % of the
// DRAM's rate at one canvas; with four they are bound to eight blocks an SM (32 registers, no spills), as many as
// soft_probs_slices launches.
constexpr int soft_bound(int loads) { return loads > 1 ? 8 : 0; }

// Slice `blockIdx.y` of row `blockIdx.x`: 16-byte loads, a running pair per thread, merged over the block in a fixed
// order (warp butterfly, then warp 0 over the warps).
template <int kLoads>
__global__ void __launch_bounds__(kThreads, soft_bound(kLoads))
    soft_stats_kernel(const bf16* x, int64_t vocab, int64_t slice, MaxSum* part) {
  cuda::pdl_enter();
  __shared__ MaxSum sh[kThreads / 32];
  const bf16* row = x + blockIdx.x * vocab;
  const int64_t v0 = blockIdx.y * slice, v1 = v0 + slice < vocab ? v0 + slice : vocab;
  MaxSum acc{-INFINITY, 0.0f};
  auto add = [&](float v) {
    if (v > acc.m) {
      acc.s = acc.s * expf(acc.m - v) + 1.0f;
      acc.m = v;
    } else {
      acc.s += expf(v - acc.m);
    }
  };
  const bool vec = vocab % 8 == 0;  // rows stay 16-byte aligned; slices are multiples of 8 (soft_probs_cuda)
  if (vec) {
    cuda::for_loads<kLoads, uint4>(row, v0 + 8 * threadIdx.x, v1, 8 * kThreads, [&](uint4 raw, int64_t) {
      const bf16* e = reinterpret_cast<const bf16*>(&raw);
#pragma unroll
      for (int i = 0; i < 8; ++i) add(__bfloat162float(e[i]));
    });
  } else {
    for (int64_t v = v0 + threadIdx.x; v < v1; v += kThreads) add(__bfloat162float(row[v]));
  }
  for (int off = 16; off > 0; off >>= 1)
    acc = merge(acc, MaxSum{__shfl_xor_sync(0xffffffffu, acc.m, off), __shfl_xor_sync(0xffffffffu, acc.s, off)});
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    MaxSum t = sh[0];
    for (int w = 1; w < kThreads / 32; ++w) t = merge(t, sh[w]);
    part[blockIdx.x * gridDim.y + blockIdx.y] = t;
  }
}

// Every block merges its row's slice pairs in slice order (the same result in each), then writes its slice: bf16
// probabilities, or with kFp8 their E4M3 codes under the row's scale (the largest probability, bf16(1 / sum), over
// 448: act_quant_fp8_rows of the bf16 row, with the reciprocal's product for its division: e4m3x2_times), which the
// row's first block also writes to `scale`.
template <bool kFp8, int kLoads>
__global__ void __launch_bounds__(kThreads, soft_bound(kLoads))
    soft_write_kernel(const bf16* x, int64_t vocab, int64_t slice, const MaxSum* part, float cutoff, void* p,
                      float* scale) {
  cuda::pdl_enter();
  __shared__ MaxSum row_shared;
  const MaxSum st = soft::row_stat(part, row_shared);
  const float mx = st.m, inv = 1.0f / st.s;
  const float floor = cutoff > 0.0f ? cutoff * inv : 0.0f;  // p_max = 1 / sum
  const float s8 = cuda::rbf(inv) / 448.0f;                 // kFp8: the row's scale
  const float r8 = cuda::e4m3_reciprocal(s8);
  if (kFp8 && blockIdx.y == 0 && threadIdx.x == 0) scale[blockIdx.x] = s8;
  const bf16* row = x + blockIdx.x * vocab;
  const int64_t v0 = blockIdx.y * slice, v1 = v0 + slice < vocab ? v0 + slice : vocab;
  auto prob = [&](bf16 v) {
    const float pr = soft::prob(v, mx, inv);
    return pr >= floor ? pr : 0.0f;
  };
  if constexpr (kFp8) {
    uint8_t* out = static_cast<uint8_t*>(p) + blockIdx.x * vocab;
    if (vocab % 8 == 0) {
      cuda::for_loads<kLoads, uint4>(row, v0 + 8 * threadIdx.x, v1, 8 * kThreads, [&](uint4 raw, int64_t v) {
        const bf16* e = reinterpret_cast<const bf16*>(&raw);
        uint2 o;
        auto* ob = reinterpret_cast<uint16_t*>(&o);
#pragma unroll
        for (int i = 0; i < 4; ++i) ob[i] = cuda::e4m3x2_times(prob(e[2 * i]), prob(e[2 * i + 1]), r8);
        *reinterpret_cast<uint2*>(out + v) = o;
      });
    } else {
      for (int64_t v = v0 + threadIdx.x; v < v1; v += kThreads)
        out[v] = static_cast<uint8_t>(cuda::e4m3x2_times(prob(row[v]), 0.0f, r8));
    }
  } else {
    bf16* out = static_cast<bf16*>(p) + blockIdx.x * vocab;
    if (vocab % 8 == 0) {
      cuda::for_loads<kLoads, uint4>(row, v0 + 8 * threadIdx.x, v1, 8 * kThreads, [&](uint4 raw, int64_t v) {
        const bf16* e = reinterpret_cast<const bf16*>(&raw);
        uint4 o;
        bf16* oe = reinterpret_cast<bf16*>(&o);
#pragma unroll
        for (int i = 0; i < 8; ++i) oe[i] = __float2bfloat16_rn(prob(e[i]));
        *reinterpret_cast<uint4*>(out + v) = o;
      });
    } else {
      for (int64_t v = v0 + threadIdx.x; v < v1; v += kThreads) out[v] = __float2bfloat16_rn(prob(row[v]));
    }
  }
}

}  // namespace

int64_t soft_probs_slices(int64_t rows, int64_t vocab) {
  const int64_t want = (8 * static_cast<int64_t>(cuda::sm_count()) + rows - 1) / rows;  // about eight blocks per SM
  const int64_t most = (vocab + 8 * kThreads - 1) / (8 * kThreads);                     // a slice: >= 8 per thread
  return std::max<int64_t>(1, std::min(want, most));
}

namespace {

template <int kLoads>
void launch_soft(dim3 grid, const bf16* x, int64_t vocab, int64_t slice, MaxSum* part, float cutoff, void* probs,
                 float* scale, bool stats_done, cudaStream_t s) {
  if (!stats_done) cuda::launch(soft_stats_kernel<kLoads>, grid, kThreads, 0, s, x, vocab, slice, part);
  if (probs == nullptr) return;  // soft_probs_stats_cuda: the first pass alone
  if (scale != nullptr)
    cuda::launch(soft_write_kernel<true, kLoads>, grid, kThreads, 0, s, x, vocab, slice, part, cutoff, probs, scale);
  else
    cuda::launch(soft_write_kernel<false, kLoads>, grid, kThreads, 0, s, x, vocab, slice, part, cutoff, probs, scale);
}

Status soft_probs(const void* logits, int64_t rows, int64_t vocab, float sparse_cutoff, void* probs, float* scale,
                  void* scratch, int loads, bool stats_done, cudaStream_t s) {
  if (loads != 1 && loads != 4) return Status::error("soft_probs_cuda: loads in flight must be 1 or 4");
  if (rows == 0) return Status::ok();
  if (rows > 0x7fffffff) return Status::error("soft_probs_cuda: too many rows");
  const soft::Slices sl = soft::slices(rows, vocab);
  auto* part = static_cast<MaxSum*>(scratch);
  const auto* x = static_cast<const bf16*>(logits);
  if (loads == 4)
    launch_soft<4>(sl.grid, x, vocab, sl.slice, part, sparse_cutoff, probs, scale, stats_done, s);
  else
    launch_soft<1>(sl.grid, x, vocab, sl.slice, part, sparse_cutoff, probs, scale, stats_done, s);
  return cuda_status(cudaGetLastError(), "soft_probs_cuda");
}

}  // namespace

Status soft_probs_cuda(const void* logits, int64_t rows, int64_t vocab, float sparse_cutoff, void* probs,
                       void* scratch, cudaStream_t s, int loads, bool stats_done) {
  return soft_probs(logits, rows, vocab, sparse_cutoff, probs, nullptr, scratch, loads, stats_done, s);
}

Status soft_probs_fp8_cuda(const void* logits, int64_t rows, int64_t vocab, float sparse_cutoff, void* codes,
                           float* scale, void* scratch, cudaStream_t s, int loads, bool stats_done) {
  if (scale == nullptr) return Status::error("soft_probs_fp8_cuda: no scale buffer");
  return soft_probs(logits, rows, vocab, sparse_cutoff, codes, scale, scratch, loads, stats_done, s);
}

Status soft_probs_stats_cuda(const void* logits, int64_t rows, int64_t vocab, void* scratch, cudaStream_t s,
                             int loads) {
  return soft_probs(logits, rows, vocab, 0.0f, nullptr, nullptr, scratch, loads, false, s);
}

}  // namespace dg
