#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "ops/row_stats/row_stats.h"

namespace dg {
namespace {

constexpr int kThreads = 256;

// Block-wide argmax with the lowest index winning ties; every thread gets the result.
__device__ void block_argmax(float& v, int& i, float* sv, int* si) {
  for (int off = 16; off > 0; off >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, off);
    const int oi = __shfl_xor_sync(0xffffffffu, i, off);
    if (ov > v || (ov == v && oi < i)) {
      v = ov;
      i = oi;
    }
  }
  if ((threadIdx.x & 31) == 0) {
    sv[threadIdx.x >> 5] = v;
    si[threadIdx.x >> 5] = i;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w)
      if (sv[w] > sv[0] || (sv[w] == sv[0] && si[w] < si[0])) {
        sv[0] = sv[w];
        si[0] = si[w];
      }
  }
  __syncthreads();
  v = sv[0];
  i = si[0];
  __syncthreads();
}

__device__ double block_sum(double v, double* sh) {
  v = cuda::warp_sum(v);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  double t = 0.0;
  for (int w = 0; w < kThreads / 32; ++w) t += sh[w];  // fixed order: deterministic
  __syncthreads();
  return t;
}

__global__ void row_stats_kernel(const float* raw, int64_t vocab, float temperature, cuda::bf16* tempered,
                                 RowStats* stats) {
  __shared__ float sv[kThreads / 32];
  __shared__ int si[kThreads / 32];
  __shared__ double sd[kThreads / 32];
  const float* x = raw + blockIdx.x * vocab;
  cuda::bf16* t = tempered + blockIdx.x * vocab;
  float best = -INFINITY;
  int best_i = 0x7fffffff;
  for (int64_t v = threadIdx.x; v < vocab; v += kThreads) {
    const float y = x[v] / temperature;
    t[v] = __float2bfloat16_rn(y);
    if (y > best) {
      best = y;
      best_i = static_cast<int>(v);
    }
  }
  block_argmax(best, best_i, sv, si);
  double s = 0.0, sx = 0.0;
  for (int64_t v = threadIdx.x; v < vocab; v += kThreads) {
    const double y = static_cast<double>(x[v] / temperature) - best;
    const double e = exp(y);
    s += e;
    sx += e * y;
  }
  s = block_sum(s, sd);
  sx = block_sum(sx, sd);
  if (threadIdx.x == 0) {
    stats[blockIdx.x].argmax = best_i;
    stats[blockIdx.x].entropy = static_cast<float>(log(s) - sx / s);
    stats[blockIdx.x].p_max = static_cast<float>(1.0 / s);
  }
}

__global__ void categorical_kernel(const float* raw, int64_t vocab, float temperature, const double* u, int32_t* ids) {
  __shared__ float sv[kThreads / 32];
  __shared__ int si[kThreads / 32];
  __shared__ double sd[kThreads / 32];
  __shared__ double prefix[kThreads + 1];
  __shared__ int found;
  const float* x = raw + blockIdx.x * vocab;
  float mx = -INFINITY;
  int mi = 0;
  for (int64_t v = threadIdx.x; v < vocab; v += kThreads) {
    const float y = x[v] / temperature;
    if (y > mx) {
      mx = y;
      mi = static_cast<int>(v);
    }
  }
  block_argmax(mx, mi, sv, si);
  double total = 0.0;
  for (int64_t v = threadIdx.x; v < vocab; v += kThreads) total += exp(static_cast<double>(x[v] / temperature - mx));
  total = block_sum(total, sd);
  // Contiguous chunks per thread, their sums, an exclusive scan, then one thread walks the chunk holding u.
  const int64_t chunk = (vocab + kThreads - 1) / kThreads;
  const int64_t b = threadIdx.x * chunk, e = min(vocab, b + chunk);
  double local = 0.0;
  int last_pos = -1;
  for (int64_t v = b; v < e; ++v) {
    const double p = exp(static_cast<double>(x[v] / temperature - mx)) / total;
    local += p;
    if (p > 0.0) last_pos = static_cast<int>(v);
  }
  prefix[threadIdx.x + 1] = local;
  if (threadIdx.x == 0) {
    prefix[0] = 0.0;
    found = -1;
  }
  __syncthreads();
  if (threadIdx.x == 0)
    for (int i = 1; i <= kThreads; ++i) prefix[i] += prefix[i - 1];
  __syncthreads();
  const double target = u[blockIdx.x];
  if (target >= prefix[threadIdx.x] && target < prefix[threadIdx.x + 1]) {
    double acc = prefix[threadIdx.x];
    for (int64_t v = b; v < e; ++v) {
      acc += exp(static_cast<double>(x[v] / temperature - mx)) / total;
      if (target < acc) {
        found = static_cast<int>(v);
        break;
      }
    }
    if (found < 0) found = static_cast<int>(e - 1);
  }
  // u at or above the rounded total: the last index with nonzero probability.
  float lp = static_cast<float>(last_pos);
  int li = last_pos;
  __syncthreads();
  if (found < 0) {
    block_argmax(lp, li, sv, si);
    if (threadIdx.x == 0) ids[blockIdx.x] = li;
  } else if (threadIdx.x == 0) {
    ids[blockIdx.x] = found;
  }
}

}  // namespace

Status row_stats_cuda(const float* raw, int64_t rows, int64_t vocab, float temperature, void* tempered_bf16,
                      RowStats* stats, cudaStream_t s) {
  if (rows == 0) return Status::ok();
  row_stats_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(raw, vocab, temperature,
                                                                      static_cast<cuda::bf16*>(tempered_bf16), stats);
  return cuda_status(cudaGetLastError(), "row_stats_cuda");
}

Status categorical_cuda(const float* raw, int64_t rows, int64_t vocab, float temperature, const double* u,
                        int32_t* ids, cudaStream_t s) {
  if (rows == 0) return Status::ok();
  categorical_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(raw, vocab, temperature, u, ids);
  return cuda_status(cudaGetLastError(), "categorical_cuda");
}

}  // namespace dg
