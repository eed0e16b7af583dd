// Inverse-CDF draws over softmax(raw / T) (categorical_draw's arithmetic) in three launches that spread a canvas
// over the whole GPU instead of one block walking each row three times:
//   1. cat_max_kernel, block (row, slice): the slice's max of y = raw / T;
//   2. cat_sum_kernel, block (row, slice): the row's max M from the slices' maxima, then the slice's f64 sum of
//      e = exp(f64(y - M)), the same e as the CPU's (y - M rounded in f32 as there), and its last index with e > 0;
//   3. cat_pick_kernel, block per row: total = the slices' sums in order, the first slice whose running share passes
//      u, and inside it a block-wide scan of p = e / total in element order to the first index whose running sum
//      passes u. Only the sums' order differs from the CPU's one running sum (about 1e-16 relative), so a draw
//      differs only where u sits within about 1e-12 of a CDF boundary (docs/NUMERICS.md).
// A u at or above the rounded total draws the row's last index with p > 0, as the CPU's fallback.
#include <algorithm>

#include "core/cuda/capture_arena.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/row_stats/row_stats_cuda.h"

namespace dg {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

struct SliceSum {
  double s;  // sum of e over the slice
  int last;  // last index of the slice with e > 0, or -1
};

__global__ void __launch_bounds__(kThreads) cat_max_kernel(const float* raw, int64_t vocab, int64_t slice,
                                                           float temperature, float* part_max) {
  cuda::pdl_enter();
  __shared__ float sh[kWarps];
  const int64_t row = blockIdx.x, v0 = blockIdx.y * slice, v1 = min(vocab, v0 + slice);
  const float* x = raw + row * vocab;
  float m = -INFINITY;
  for (int64_t v = v0 + threadIdx.x; v < v1; v += kThreads) m = fmaxf(m, x[v] / temperature);
  m = cuda::block_reduce<kThreads>(m, true, sh);
  if (threadIdx.x == 0) part_max[row * gridDim.y + blockIdx.y] = m;
}

__global__ void __launch_bounds__(kThreads) cat_sum_kernel(const float* raw, int64_t vocab, int64_t slice,
                                                           float temperature, const float* part_max,
                                                           SliceSum* part) {
  cuda::pdl_enter();
  __shared__ double sd[kWarps];
  __shared__ int si[kWarps];
  const int64_t row = blockIdx.x, v0 = blockIdx.y * slice, v1 = min(vocab, v0 + slice);
  const float* x = raw + row * vocab;
  float M = -INFINITY;
  for (unsigned k = 0; k < gridDim.y; ++k) M = fmaxf(M, part_max[row * gridDim.y + k]);
  double s = 0.0;
  int last = -1;
  for (int64_t v = v0 + threadIdx.x; v < v1; v += kThreads) {
    const double e = exp(static_cast<double>(x[v] / temperature - M));
    s += e;
    if (e > 0.0) last = static_cast<int>(v);
  }
  s = cuda::warp_sum(s);
  for (int o = 16; o > 0; o >>= 1) last = max(last, __shfl_xor_sync(0xffffffffu, last, o));
  if ((threadIdx.x & 31) == 0) {
    sd[threadIdx.x >> 5] = s;
    si[threadIdx.x >> 5] = last;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double t = 0.0;
    int l = -1;
    for (int w = 0; w < kWarps; ++w) {  // fixed order: deterministic
      t += sd[w];
      l = max(l, si[w]);
    }
    part[row * gridDim.y + blockIdx.y] = SliceSum{t, l};
  }
}

// Inclusive scan of one double per thread over the block, in thread order; every thread gets its prefix and `total`
// the block's sum.
__device__ double block_scan(double v, double* sh, double& total) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  for (int o = 1; o < 32; o <<= 1) {
    const double n = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += n;
  }
  if (lane == 31) sh[w] = v;
  __syncthreads();
  double before = 0.0;
  total = 0.0;
  for (int k = 0; k < kWarps; ++k) {
    if (k < w) before += sh[k];
    total += sh[k];
  }
  __syncthreads();
  return before + v;
}

__global__ void __launch_bounds__(kThreads) cat_pick_kernel(const float* raw, int64_t vocab, int64_t slice,
                                                            int slices, float temperature, const float* part_max,
                                                            const SliceSum* part, const double* u, int32_t* ids) {
  cuda::pdl_enter();
  __shared__ double sh[kWarps];
  __shared__ int found;
  const int64_t row = blockIdx.x;
  const float* x = raw + row * vocab;
  const SliceSum* ps = part + row * slices;
  float M = -INFINITY;
  double total = 0.0;
  int last = -1;
  for (int k = 0; k < slices; ++k) {  // every thread, in slice order: the same total everywhere
    M = fmaxf(M, part_max[row * slices + k]);
    total += ps[k].s;
    last = max(last, ps[k].last);
  }
  const double target = u[row];
  // The first slice whose running share passes u; scanning continues past it only when rounding put the crossing
  // one slice later than the shares said. A u past every share scans the last slice from its own start.
  double acc = 0.0, last_start = 0.0;
  int first = 0;
  for (; first < slices; ++first) {
    const double next = acc + ps[first].s / total;
    if (target < next) break;
    last_start = acc;
    acc = next;
  }
  if (first == slices) {
    first = slices - 1;
    acc = last_start;
  }
  for (int64_t v0 = static_cast<int64_t>(first) * slice; v0 < vocab; v0 += kThreads) {
    const int64_t v = v0 + threadIdx.x;
    const double p = v < vocab ? exp(static_cast<double>(x[v] / temperature - M)) / total : 0.0;
    double tile = 0.0;
    const double incl = acc + block_scan(p, sh, tile);  // every thread: the scan has barriers and full-warp shuffles
    const bool pass = v < vocab && target < incl;
    if (__syncthreads_or(pass)) {  // the running sum only grows: the first passing index is the draw
      if (threadIdx.x == 0) found = 0x7fffffff;
      __syncthreads();
      if (pass) atomicMin(&found, static_cast<int>(v));
      __syncthreads();
      if (threadIdx.x == 0) ids[row] = found;
      return;
    }
    acc += tile;
  }
  // u at or above the rounded total: the last index with p = e / total > 0, as the CPU's fallback; past `last` every
  // e is 0, so the search walks back from there (0 when no p is positive, as the CPU's).
  for (int64_t v1 = last; v1 >= 0; v1 -= kThreads) {
    const int64_t v = v1 - threadIdx.x;
    const bool positive = v >= 0 && exp(static_cast<double>(x[v] / temperature - M)) / total > 0.0;
    if (__syncthreads_or(positive)) {
      if (threadIdx.x == 0) found = -1;
      __syncthreads();
      if (positive) atomicMax(&found, static_cast<int>(v));
      __syncthreads();
      if (threadIdx.x == 0) ids[row] = found;
      return;
    }
  }
  if (threadIdx.x == 0) ids[row] = 0;
}

}  // namespace

Status categorical_cuda(const float* raw, int64_t rows, int64_t vocab, float temperature, const double* u,
                        int32_t* ids, cudaStream_t s) {
  if (rows == 0) return Status::ok();
  if (vocab <= 0) return Status::error("categorical_cuda: an empty vocabulary");
  if (rows > 0x7fffffff || vocab > 0x7fffffff) return Status::error("categorical_cuda: shape too large");
  // Slices of at least 4,096 entries, at most 64 a row: the pick scans one of them, 16 block-wide steps at 4,096.
  const int64_t slices = std::max<int64_t>(1, std::min<int64_t>(64, vocab / 4096));
  const int64_t slice = (vocab + slices - 1) / slices;
  const int n = static_cast<int>((vocab + slice - 1) / slice);
  const auto count = static_cast<size_t>(rows * n);
  void* scratch = nullptr;
  const cudaError_t e = cuda::stream_alloc(&scratch, count * (sizeof(float) + sizeof(SliceSum)), s);
  if (e != cudaSuccess) return cuda_status(e, "categorical_cuda (slice scratch)");
  auto* part = static_cast<SliceSum*>(scratch);  // SliceSum first: its 8-byte alignment holds
  auto* part_max = reinterpret_cast<float*>(part + count);
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(n));
  cuda::launch(cat_max_kernel, grid, kThreads, 0, s, raw, vocab, slice, temperature, part_max);
  cuda::launch(cat_sum_kernel, grid, kThreads, 0, s, raw, vocab, slice, temperature, part_max, part);
  cuda::launch(cat_pick_kernel, static_cast<unsigned>(rows), kThreads, 0, s, raw, vocab, slice, n, temperature,
               part_max, part, u, ids);
  cuda::stream_free(scratch, s);
  return cuda_status(cudaGetLastError(), "categorical_cuda");
}

}  // namespace dg
