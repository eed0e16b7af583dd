#include <algorithm>
#include <string>

#include "core/cuda/capture_arena.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/logits/softcap.cuh"
#include "ops/row_stats/row_stats_cuda.h"

namespace dg {
namespace {

constexpr int kThreads = 256;

// Block-wide argmax with the lowest index winning ties; every thread gets the result.
__device__ void block_argmax(float& v, int& i, float* sv, int* si) {
  cuda::warp_argmax(v, i);
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

// Row statistics in slices: block (row, slice) walks its slice of the vocabulary once with a running max per
// thread (when the max grows, the f64 sums s = sum e^d and sx = sum e^d d, d = y - max, are rescaled), then the
// block merges its threads in a fixed order; stats_merge_kernel merges the slices of a row, again in order. Same
// quantities as row_stats_cpu; each e^d is an f32 expf and the summation order differs, so the sums agree to about
// 1e-7 relative, not bit for bit.
struct Partial {
  float m;
  int i;
  double s, sx;
};

__device__ __forceinline__ void online_add(float y, int v, float& m, int& mi, double& s, double& sx) {
  if (y > m) {
    if (s > 0.0) {
      const double d = static_cast<double>(m) - static_cast<double>(y), r = exp(d);
      sx = r * (sx + d * s);
      s *= r;
    }
    m = y;
    mi = v;
  }
  if (y == -INFINITY) return;  // weighs nothing (and m may still be -inf)
  // Per element in f32 (an f64 exp per entry made this pass compute-bound: 267 µs for 256 x 262,144 on an H200),
  // summed in f64: relative error about 1e-7 against row_stats_cpu's f64 exp, under the 1e-5 bound.
  const float d = y - m, e = expf(d);
  s += static_cast<double>(e);
  sx += static_cast<double>(e) * static_cast<double>(d);
}

// (s, sx) measured from max m, re-expressed from max M >= m.
__device__ __forceinline__ void rebase(float m, float M, double& s, double& sx) {
  if (s <= 0.0) return;
  const double d = static_cast<double>(m) - static_cast<double>(M), r = exp(d);
  sx = r * (sx + d * s);
  s *= r;
}

// Four consecutive entries v .. v + 3 at once: the running max moves at most once (to the group's max, the argmax its
// first entry there), and the four terms are summed in f32 before the f64 sums take them. Fewer instructions an entry
// than online_add (one rescale test and two f64 adds a group, not a branch, two conversions and two f64 operations an
// entry: the vocabulary passes were issue-bound); the sums differ from online_add's by the f32 rounding of a 4-term
// sum (about 1e-7 relative, under row_stats' 1e-5 bound); -inf entries weigh nothing, a NaN still poisons the row.
__device__ __forceinline__ void group_add(const float (&y)[4], int64_t v, float& m, int& mi, double& s, double& sx) {
  const float g = fmaxf(fmaxf(y[0], y[1]), fmaxf(y[2], y[3]));
  if (g > m) {
    rebase(m, g, s, sx);
    m = g;
    mi = static_cast<int>(v) + (y[0] == g ? 0 : y[1] == g ? 1 : y[2] == g ? 2 : 3);
  }
  float gs = 0.0f, gsx = 0.0f;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const bool none = y[k] == -INFINITY;  // and m may still be -inf
    const float d = none ? 0.0f : y[k] - m, e = none ? 0.0f : expf(d);
    gs += e;
    gsx = fmaf(e, d, gsx);
  }
  s += static_cast<double>(gs);
  sx += static_cast<double>(gsx);
}

// kOpen: raw holds the lm_head's sums with its last step left open (OpenLogitsIn); each entry is finished as the
// softcap passes finish it before it is used, and stored back in place where open.finish. kGroups (RowStatsForm::
// kGroups): four loads in flight and group_add instead of two and online_add; bound to five blocks an SM (48
// registers: the open form spilled under six's 40). Otherwise the open form is bound to six blocks (40 registers, no
// spills), the plain one not at all (40 registers).
constexpr int bound_blocks(bool open, bool groups) { return groups ? 5 : open ? 6 : 0; }
template <bool kVec4, bool kOpen = false, bool kGroups = false>
__global__ void __launch_bounds__(kThreads, bound_blocks(kOpen, kGroups))
    row_slice_kernel(const float* raw, int64_t vocab, int64_t slice, float temperature, cuda::bf16* tempered,
                     Partial* part, OpenLogitsIn open) {
  cuda::pdl_enter();
  __shared__ float sv[kThreads / 32];
  __shared__ int si[kThreads / 32];
  __shared__ double sd[kThreads / 32];
  const int64_t row = blockIdx.x, v0 = blockIdx.y * slice;
  const int64_t v1 = v0 + slice < vocab ? v0 + slice : vocab;
  const float* x = raw + row * vocab;
  cuda::bf16* t = tempered + row * vocab;
  float m = -INFINITY;
  int mi = 0x7fffffff;
  double s = 0.0, sx = 0.0;
  const float rs = kOpen && open.row_scale != nullptr ? open.row_scale[row] : 1.0f;
  if (kVec4) {  // vocab and slice are multiples of 4: 16-byte loads, 8-byte stores
    const auto take = [&](float4 q, int64_t v) {
      if constexpr (kOpen) {
        if (open.row_scale != nullptr) {
          const float4 cs = *reinterpret_cast<const float4*>(open.col_scale + v);
          const float c = open.cap;
          q = make_float4(cuda::softcapped_scaled(q.x, rs, cs.x, c), cuda::softcapped_scaled(q.y, rs, cs.y, c),
                          cuda::softcapped_scaled(q.z, rs, cs.z, c), cuda::softcapped_scaled(q.w, rs, cs.w, c));
        } else {
          q = make_float4(cuda::softcapped(q.x, open.cap), cuda::softcapped(q.y, open.cap),
                          cuda::softcapped(q.z, open.cap), cuda::softcapped(q.w, open.cap));
        }
        if (open.finish) *reinterpret_cast<float4*>(const_cast<float*>(x) + v) = q;
      }
      const float y[4] = {q.x / temperature, q.y / temperature, q.z / temperature, q.w / temperature};
      __nv_bfloat162 b[2] = {__floats2bfloat162_rn(y[0], y[1]), __floats2bfloat162_rn(y[2], y[3])};
      *reinterpret_cast<uint2*>(t + v) = *reinterpret_cast<const uint2*>(b);
      if constexpr (kGroups) {
        group_add(y, v, m, mi, s, sx);
      } else {
#pragma unroll
        for (int k = 0; k < 4; ++k) online_add(y[k], static_cast<int>(v + k), m, mi, s, sx);
      }
    };
    // Four loads in flight with kGroups, else two (two left the pass waiting on them a third of its cycles at one
    // canvas); each thread still takes its entries in increasing order.
    cuda::for_loads<kGroups ? 4 : 2, float4>(x, v0 + 4 * threadIdx.x, v1, 4 * kThreads, take);
  } else {
    for (int64_t v = v0 + threadIdx.x; v < v1; v += kThreads) {
      float l = x[v];
      if constexpr (kOpen) {  // unscaled only (the launcher refuses scales here)
        l = cuda::softcapped(l, open.cap);
        if (open.finish) const_cast<float*>(x)[v] = l;
      }
      const float y = l / temperature;
      t[v] = __float2bfloat16_rn(y);
      online_add(y, static_cast<int>(v), m, mi, s, sx);
    }
  }
  float M = m;
  int MI = mi;
  block_argmax(M, MI, sv, si);
  rebase(m, M, s, sx);
  s = block_sum(s, sd);
  sx = block_sum(sx, sd);
  if (threadIdx.x == 0) part[row * gridDim.y + blockIdx.y] = Partial{M, MI, s, sx};
}

__global__ void stats_merge_kernel(const Partial* part, int64_t rows, int slices, RowStats* stats) {
  cuda::pdl_enter();
  const int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (row >= rows) return;
  const Partial* p = part + row * slices;
  float M = -INFINITY;
  int MI = 0x7fffffff;
  for (int k = 0; k < slices; ++k)
    if (p[k].m > M || (p[k].m == M && p[k].i < MI)) {
      M = p[k].m;
      MI = p[k].i;
    }
  double s = 0.0, sx = 0.0;
  for (int k = 0; k < slices; ++k) {
    double ks = p[k].s, ksx = p[k].sx;
    rebase(p[k].m, M, ks, ksx);
    s += ks;
    sx += ksx;
  }
  stats[row].argmax = MI;
  stats[row].entropy = static_cast<float>(log(s) - sx / s);
  stats[row].p_max = static_cast<float>(1.0 / s);
}

// The blocks of row_slice_kernel<kVec4, false, kGroups> that one wave holds on the device first asked (read once per
// variant).
template <bool kVec4, bool kGroups = false> int64_t wave_blocks() {
  static const int64_t wave =
      static_cast<int64_t>(cuda::resident_per_sm(row_slice_kernel<kVec4, false, kGroups>, kThreads, 0)) *
      cuda::sm_count();
  return wave;
}

// The slices of a row and their launch: the plain and open forms slice as the plain kernel's wave says, so the same
// partial sums.
struct Slicing {
  int64_t slice;
  int n;
};
Slicing slicing(int64_t rows, int64_t vocab, bool groups) {
  // Slices of at least 4,096 entries, as many as one wave of resident blocks holds (a second, partial wave left
  // most of the GPU idle: 1,280 blocks at one canvas were 1.6 waves); rows beyond a wave take one slice each.
  const int64_t wave = vocab % 4 != 0 ? wave_blocks<false>() : groups ? wave_blocks<true, true>() : wave_blocks<true>();
  const int64_t slices = std::max<int64_t>(1, std::min<int64_t>({64, wave / rows, vocab / 4096}));
  const int64_t slice = ((vocab + slices - 1) / slices + 3) / 4 * 4;
  return {slice, static_cast<int>((vocab + slice - 1) / slice)};
}

Status row_stats_launch(const float* raw, int64_t rows, int64_t vocab, float temperature, void* tempered_bf16,
                        RowStats* stats, cudaStream_t s, const OpenLogitsIn* open, RowStatsForm form,
                        const char* what) {
  if (rows == 0) return Status::ok();
  if (rows > 0x7fffffff || vocab > 0x7fffffff) return Status::error(std::string(what) + ": shape too large");
  const bool vec4 = vocab % 4 == 0, groups = vec4 && form == RowStatsForm::kGroups;  // groups need 16-byte loads
  const Slicing sl = slicing(rows, vocab, groups);
  Partial* part = nullptr;
  const cudaError_t e =
      cuda::stream_alloc(reinterpret_cast<void**>(&part), sizeof(Partial) * static_cast<size_t>(rows * sl.n), s);
  if (e != cudaSuccess) return cuda_status(e, what);
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(sl.n));
  auto* t = static_cast<cuda::bf16*>(tempered_bf16);
  auto* kernel = groups ? (open != nullptr ? row_slice_kernel<true, true, true> : row_slice_kernel<true, false, true>)
                 : open != nullptr ? (vec4 ? row_slice_kernel<true, true> : row_slice_kernel<false, true>)
                                   : (vec4 ? row_slice_kernel<true> : row_slice_kernel<false>);
  cuda::launch(kernel, grid, kThreads, 0, s, raw, vocab, sl.slice, temperature, t, part,
               open != nullptr ? *open : OpenLogitsIn{});
  cuda::launch(stats_merge_kernel, cuda::blocks_for(rows, 128), 128, 0, s, part, rows, sl.n, stats);
  cuda::stream_free(part, s);
  return cuda_status(cudaGetLastError(), what);
}

}  // namespace

Status row_stats_cuda(const float* raw, int64_t rows, int64_t vocab, float temperature, void* tempered_bf16,
                      RowStats* stats, cudaStream_t s, RowStatsForm form) {
  return row_stats_launch(raw, rows, vocab, temperature, tempered_bf16, stats, s, nullptr, form, "row_stats_cuda");
}

Status row_stats_open_cuda(float* raw, int64_t rows, int64_t vocab, const OpenLogitsIn& open, float temperature,
                           void* tempered_bf16, RowStats* stats, cudaStream_t s, RowStatsForm form) {
  const auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  if ((open.row_scale == nullptr) != (open.col_scale == nullptr))
    return Status::error("row_stats_open_cuda: the row and column scales come together (a W8A8 product's) or not "
                         "at all");
  if (open.row_scale != nullptr && (vocab % 4 != 0 || !aligned(raw) || !aligned(open.col_scale)))
    return Status::error("row_stats_open_cuda: scaled sums need vocab % 4 == 0 (got " + std::to_string(vocab) +
                         ") and 16-byte aligned sums and column scales");
  if (vocab % 4 == 0 && !aligned(raw))
    return Status::error("row_stats_open_cuda: the logits must be 16-byte aligned");
  return row_stats_launch(raw, rows, vocab, temperature, tempered_bf16, stats, s, &open, form, "row_stats_open_cuda");
}

}  // namespace dg
