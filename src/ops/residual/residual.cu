// One block per row. Rows of a multiple of 8 elements up to kVecMaxDim (16-byte aligned) move as 16-byte vectors
// held in registers; other rows live in shared memory as f32 between the passes, the per-thread sums of squares
// walking i = tid, tid + 256, ... Both reduce as rmsnorm_kernel does (warp butterfly, then warp 0 over the warp sums).
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/e4m3_rows.cuh"
#include "core/cuda/launch.cuh"
#include "ops/residual/residual.h"
#include "ops/rmsnorm/warp_norm.cuh"

#include <initializer_list>
#include <string>

namespace dg {
namespace {

using cuda::bf16;
using cuda::rbf;
constexpr int kThreads = 256;

// The block's total of per-thread partial sums, in rmsnorm_kernel's order; every thread gets it.
__device__ float block_sum(float v, float* sh) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    float t = threadIdx.x < kThreads / 32 ? sh[threadIdx.x] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) t += __shfl_xor_sync(0xffffffffu, t, off);
    if (threadIdx.x == 0) sh[kThreads / 32] = t;
  }
  __syncthreads();
  const float r = sh[kThreads / 32];
  __syncthreads();  // sh is reused by the next sum
  return r;
}

__device__ __forceinline__ float inv_rms(float ss, int64_t dim, float eps) {
  return rsqrtf(ss / static_cast<float>(dim) + eps);
}

struct NormOuts {
  const bf16* w[3];
  bf16* y[3];
  uint8_t* codes[2];  // y[0]'s and y[1]'s E4M3 row codes and scales (RowCodesOut), or null
  float* scale[2];
  const bf16* router_scale;  // the router's input (MoeInputsOut): r null for none
  bf16* r;
  float root;
};

// The vectorised kernels: a block per row, each thread holds up to kVecPerThread 8-element vectors of the row in
// registers (rows up to 256 * 8 * kVecPerThread elements), every load of a pass issued before its first use.
constexpr int kVecPerThread = 2;
constexpr int64_t kVecMaxDim = int64_t{kThreads} * 8 * kVecPerThread;

// Eight bf16 at p (16-byte aligned) as f32.
__device__ __forceinline__ void load8(const bf16* p, float* f) {
  const uint4 v = *reinterpret_cast<const uint4*>(p);
  const auto* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 t = __bfloat1622float2(h[j]);
    f[2 * j] = t.x;
    f[2 * j + 1] = t.y;
  }
}
__device__ __forceinline__ uint4 pack8(const float* f) {
  uint4 v;
  auto* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
  for (int j = 0; j < 4; ++j) h[j] = __floats2bfloat162_rn(f[2 * j], f[2 * j + 1]);
  return v;
}
__device__ __forceinline__ void store8(bf16* p, const float* f) { *reinterpret_cast<uint4*>(p) = pack8(f); }

// A raw sum's eight values at element i of row `row` times their scales (RawRowScales; none when col is null).
__device__ __forceinline__ void scale_raw8(const RawRowScales& raw, int64_t row, int64_t i, float* f) {
  if (raw.col == nullptr) return;
  const float rs = raw.row[row];
  const float4 c0 = *reinterpret_cast<const float4*>(raw.col + i), c1 = *reinterpret_cast<const float4*>(raw.col + i + 4);
  const float cs[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
#pragma unroll
  for (int j = 0; j < 8; ++j) f[j] = f[j] * rs * cs[j];
}

// Element offset of this thread's vector q in the row, or -1 past its end.
__device__ __forceinline__ int64_t vec_at(int q, int64_t dim) {
  const int64_t i = 8 * (threadIdx.x + static_cast<int64_t>(q) * kThreads);
  return i < dim ? i : -1;
}

// The output k's weight at element i (1 where it has none).
__device__ __forceinline__ void load_weight8(const bf16* w, int64_t i, float* g) {
  if (w != nullptr) {
    load8(w + i, g);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) g[j] = 1.0f;
  }
}

// This thread's chunks of a row, v times inv and the weight w (all in registers; tmp: scratch, which may be w), stored
// at row (bf16) and held in y for the codes that follow (zeros past the row's end).
template <int kV>
__device__ __forceinline__ void store_normed(const float (&v)[kV][8], float inv, const float (&w)[kV][8],
                                             float (&tmp)[kV][8], bf16* row, int64_t dim, uint4 (&y)[kV]) {
#pragma unroll
  for (int q = 0; q < kV; ++q) {
    y[q] = make_uint4(0, 0, 0, 0);
    if (const int64_t i = vec_at(q, dim); i >= 0) {
#pragma unroll
      for (int j = 0; j < 8; ++j) tmp[q][j] = v[q][j] * inv * w[q][j];
      y[q] = pack8(tmp[q]);
      *reinterpret_cast<uint4*>(row + i) = y[q];
    }
  }
}

// Every load that waits for no sum is issued first (the attention row, w_post, h, out[0]'s weight), and the next
// output's weight before out[0]'s codes, whose maximum is taken from the rounded values in registers.
__global__ void residual_norms_vec_kernel(const bf16* h, const bf16* attn, const bf16* w_post, bf16* h1, NormOuts o,
                                          int n_out, int64_t dim, float eps, RawRowScales attn_raw) {
  cuda::pdl_enter();
  __shared__ float sh[kThreads / 32 + 1];
  const int64_t base = blockIdx.x * dim;
  constexpr int kV = kVecPerThread;
  float x[kV][8], f[kV][8], g[kV][8], wk[kV][8];
  float ss = 0.0f;
#pragma unroll
  for (int q = 0; q < kV; ++q)
    if (const int64_t i = vec_at(q, dim); i >= 0) {
      load8(attn + base + i, f[q]);
      load8(w_post + i, g[q]);
      load8(h + base + i, x[q]);
      if (n_out > 0) load_weight8(o.w[0], i, wk[q]);
      scale_raw8(attn_raw, blockIdx.x, i, f[q]);
    }
#pragma unroll
  for (int q = 0; q < kV; ++q)
    if (vec_at(q, dim) >= 0)
#pragma unroll
      for (int j = 0; j < 8; ++j) ss += f[q][j] * f[q][j];
  const float inv_a = inv_rms(block_sum(ss, sh), dim, eps);
  ss = 0.0f;
#pragma unroll
  for (int q = 0; q < kV; ++q)
    if (const int64_t i = vec_at(q, dim); i >= 0) {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        x[q][j] = rbf(x[q][j] + rbf(f[q][j] * inv_a * g[q][j]));
        ss += x[q][j] * x[q][j];
      }
      store8(h1 + base + i, x[q]);
    }
  const float inv_h = inv_rms(block_sum(ss, sh), dim, eps);
  for (int k = 0; k < n_out; ++k) {
    uint4 y[kV];
    store_normed(x, inv_h, wk, f, o.y[k] + base, dim, y);
    if (k + 1 < n_out)
#pragma unroll
      for (int q = 0; q < kV; ++q)
        if (const int64_t i = vec_at(q, dim); i >= 0) load_weight8(o.w[k + 1], i, wk[q]);
    // The output's codes: thread t holds chunks t + 256 q, act_quant_row_vals' layout for kT = 256.
    if (k < 2 && o.codes[k] != nullptr)
      act_quant_row_vals<kThreads>(y, true, dim / 8, o.codes[k], o.scale[k], blockIdx.x,
                                   static_cast<int>(threadIdx.x), sh);
  }
  if (o.r == nullptr) return;
  // The router's input: router_prep of h1's unweighted norm, each product rounded as moe_router_input_cuda rounds it.
#pragma unroll
  for (int q = 0; q < kV; ++q)
    if (const int64_t i = vec_at(q, dim); i >= 0) load_weight8(o.router_scale, i, wk[q]);
#pragma unroll
  for (int q = 0; q < kV; ++q)
    if (const int64_t i = vec_at(q, dim); i >= 0) {
#pragma unroll
      for (int j = 0; j < 8; ++j) f[q][j] = rbf(rbf(x[q][j] * inv_h) * wk[q][j]) * o.root;
      store8(o.r + base + i, f[q]);
    }
}

// m2's row as stored.
struct RowsM2 {
  const bf16* m2;
  __device__ __forceinline__ void load(int64_t row, int64_t dim, int64_t i, float* f) const {
    load8(m2 + row * dim + i, f);
  }
};
// m2's row combined from the MoE's expert rows: bf16(sum_k weight[row, k] * y[inv[row * top_k + k]]) in rank
// order, moe_combine_cuda's arithmetic. kTopK > 0: top_k is kTopK, and every rank's row is requested before the
// first is summed (the gathers are the kernel's latency at many canvases); 0: any top_k, one rank at a time.
template <int kTopK>
struct CombinedM2 {
  const bf16* y;
  const int32_t* inv;
  const float* weight;
  int top_k;
  __device__ __forceinline__ void load(int64_t row, int64_t dim, int64_t i, float* f) const {
    float acc[8] = {};
    if constexpr (kTopK > 0) {
      float v[kTopK][8];
#pragma unroll
      for (int k = 0; k < kTopK; ++k) load8(y + static_cast<int64_t>(inv[row * kTopK + k]) * dim + i, v[k]);
#pragma unroll
      for (int k = 0; k < kTopK; ++k) {
        const float wk = weight[row * kTopK + k];
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[j] += wk * v[k][j];
      }
    } else {
      for (int k = 0; k < top_k; ++k) {
        const float wk = weight[row * top_k + k];
        float v[8];
        load8(y + static_cast<int64_t>(inv[row * top_k + k]) * dim + i, v);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[j] += wk * v[j];
      }
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) f[j] = rbf(acc[j]);
  }
};

// The next layer's input norm of the row out holds (NextNormOut): the stored row through shared memory, so its sum
// of squares takes rmsnorm's order (norm::row_sum_squares), then each thread's chunks normed, stored and coded.
struct NextNorm {
  const bf16* w;
  bf16* y;
  uint8_t* codes;
  float* scale;
};

template <int kV>
__device__ __forceinline__ void next_norm_row(const NextNorm& nx, float (&v)[kV][8], int64_t dim, float eps,
                                              float* row, float* sh) {
  const int64_t base = blockIdx.x * dim;
  float g[kV][8];
#pragma unroll
  for (int q = 0; q < kV; ++q)
    if (const int64_t i = vec_at(q, dim); i >= 0) {
      load8(nx.w + i, g[q]);
#pragma unroll
      for (int j = 0; j < 8; ++j) row[i + j] = v[q][j];
    }
  __syncthreads();
  const float inv = inv_rms(norm::row_sum_squares(row, static_cast<int>(dim), sh), dim, eps);
  uint4 y[kV];
  store_normed(v, inv, g, g, nx.y + base, dim, y);
  if (nx.codes != nullptr)
    act_quant_row_vals<kThreads>(y, true, dim / 8, nx.codes, nx.scale, blockIdx.x, static_cast<int>(threadIdx.x), sh);
}

// At most 128 registers, two blocks an SM. nx.y set: the launch gives dim f32 of dynamic shared memory for
// next_norm_row.
template <class M2>
__global__ void __launch_bounds__(kThreads, 2)
    ffn_tail_vec_kernel(const bf16* h1, const bf16* m1, const bf16* w1, M2 m2, const bf16* w2, const bf16* w,
                        RowScalar rs, bf16* out, int64_t dim, float eps, RawRowScales m1_raw, NextNorm nx) {
  extern __shared__ float next_row[];
  cuda::pdl_enter();
  const float scalar = static_cast<int64_t>(blockIdx.x) < rs.split ? rs.first : rs.rest;
  __shared__ float sh[kThreads / 32 + 1];
  const int64_t base = blockIdx.x * dim;
  constexpr int kV = kVecPerThread;
  float a[kV][8], b[kV][8], wa[kV][8], wb[kV][8], wc[kV][8], hc[kV][8];
  float s1 = 0.0f, s2 = 0.0f;
  // Every load that waits for no sum first: m1, m2's rows, the three weights and h1.
#pragma unroll
  for (int q = 0; q < kV; ++q)
    if (const int64_t i = vec_at(q, dim); i >= 0) {
      load8(m1 + base + i, a[q]);
      m2.load(blockIdx.x, dim, i, b[q]);
      load8(w1 + i, wa[q]);
      load8(w2 + i, wb[q]);
      load8(w + i, wc[q]);
      load8(h1 + base + i, hc[q]);
      scale_raw8(m1_raw, blockIdx.x, i, a[q]);
    }
#pragma unroll
  for (int q = 0; q < kV; ++q)
    if (vec_at(q, dim) >= 0)
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        s1 += a[q][j] * a[q][j];
        s2 += b[q][j] * b[q][j];
      }
  const float inv1 = inv_rms(block_sum(s1, sh), dim, eps), inv2 = inv_rms(block_sum(s2, sh), dim, eps);
  float ss = 0.0f;
#pragma unroll
  for (int q = 0; q < kV; ++q)
    if (vec_at(q, dim) >= 0)
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        a[q][j] = rbf(rbf(a[q][j] * inv1 * wa[q][j]) + rbf(b[q][j] * inv2 * wb[q][j]));  // f
        ss += a[q][j] * a[q][j];
      }
  const float inv = inv_rms(block_sum(ss, sh), dim, eps);
#pragma unroll
  for (int q = 0; q < kV; ++q)
    if (const int64_t i = vec_at(q, dim); i >= 0) {
#pragma unroll
      for (int j = 0; j < 8; ++j) hc[q][j] = rbf(rbf(hc[q][j] + rbf(a[q][j] * inv * wc[q][j])) * scalar);
      store8(out + base + i, hc[q]);
    }
  if (nx.y != nullptr) next_norm_row(nx, hc, dim, eps, next_row, sh);
}

// Whether every pointer is 16-byte aligned and rows are whole 16-byte vectors.
bool vec_ok(int64_t dim, std::initializer_list<const void*> ptrs) {
  if (dim % 8 != 0 || dim > kVecMaxDim) return false;
  for (const void* p : ptrs)
    if (p != nullptr && (reinterpret_cast<uintptr_t>(p) & 15) != 0) return false;
  return true;
}

__global__ void residual_norms_kernel(const bf16* h, const bf16* attn, const bf16* w_post, bf16* h1, NormOuts o,
                                      int n_out, int64_t dim, float eps) {
  cuda::pdl_enter();
  extern __shared__ float row[];  // [dim] f32
  __shared__ float sh[kThreads / 32 + 1];
  const int64_t base = blockIdx.x * dim;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
    const float v = __bfloat162float(attn[base + i]);
    ss += v * v;
  }
  const float inv_a = inv_rms(block_sum(ss, sh), dim, eps);
  ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
    const float a = rbf(__bfloat162float(attn[base + i]) * inv_a * __bfloat162float(w_post[i]));
    const float r = rbf(__bfloat162float(h[base + i]) + a);
    h1[base + i] = __float2bfloat16_rn(r);
    row[i] = r;
    ss += r * r;
  }
  const float inv_h = inv_rms(block_sum(ss, sh), dim, eps);
  for (int j = 0; j < n_out; ++j)
    for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
      float v = row[i] * inv_h;
      if (o.w[j] != nullptr) v *= __bfloat162float(o.w[j][i]);
      o.y[j][base + i] = __float2bfloat16_rn(v);
    }
}

__global__ void ffn_tail_kernel(const bf16* h1, const bf16* m1, const bf16* w1, const bf16* m2, const bf16* w2,
                                const bf16* w, RowScalar rs, bf16* out, int64_t dim, float eps) {
  cuda::pdl_enter();
  const float scalar = static_cast<int64_t>(blockIdx.x) < rs.split ? rs.first : rs.rest;
  extern __shared__ float row[];  // [dim] f32: f
  __shared__ float sh[kThreads / 32 + 1];
  const int64_t base = blockIdx.x * dim;
  float s1 = 0.0f, s2 = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
    const float a = __bfloat162float(m1[base + i]), b = __bfloat162float(m2[base + i]);
    s1 += a * a;
    s2 += b * b;
  }
  const float inv1 = inv_rms(block_sum(s1, sh), dim, eps), inv2 = inv_rms(block_sum(s2, sh), dim, eps);
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
    const float a = rbf(__bfloat162float(m1[base + i]) * inv1 * __bfloat162float(w1[i]));
    const float b = rbf(__bfloat162float(m2[base + i]) * inv2 * __bfloat162float(w2[i]));
    const float f = rbf(a + b);
    row[i] = f;
    ss += f * f;
  }
  const float inv = inv_rms(block_sum(ss, sh), dim, eps);
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
    const float fn = rbf(row[i] * inv * __bfloat162float(w[i]));
    const float r = rbf(__bfloat162float(h1[base + i]) + fn);
    out[base + i] = __float2bfloat16_rn(r * scalar);
  }
}

Status check_shape(int64_t rows, int64_t dim, const char* what) {
  if (rows <= 0 || dim <= 0) return Status::error(std::string(what) + ": empty shape");
  if (rows > 0x7fffffff) return Status::error(std::string(what) + ": too many rows for one grid");
  if (dim * 4 > 96 * 1024) return Status::error(std::string(what) + ": rows wider than 24,576 elements");
  return Status::ok();
}

Status with_smem(const void* kernel, int64_t dim, const char* what) {
  const int bytes = static_cast<int>(dim * 4);
  if (bytes <= 48 * 1024) return Status::ok();
  return cuda_status(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), what);
}

// The raw sums' scales need the vectorised rows.
Status refuse_raw(RawRowScales raw, const char* what) {
  if (raw.col == nullptr) return Status::ok();
  return Status::error(std::string(what) + ": raw W8A8 sums need rows of a multiple of 8 elements up to 4,096 and "
                       "16-byte aligned buffers and scales");
}
}  // namespace

Status residual_norms_cuda(const void* h, const void* attn, const void* w_post, void* h1, const void* const* w_out,
                           void* const* out, int n_out, int64_t rows, int64_t dim, float eps, cudaStream_t s,
                           RawRowScales attn_raw, RowCodesOut codes0, MoeInputsOut moe) {
  if (Status st = check_shape(rows, dim, "residual_norms_cuda"); !st.is_ok()) return st;
  if (n_out < 0 || n_out > 3) return Status::error("residual_norms_cuda: 0 to 3 normed outputs");
  if (codes0.codes != nullptr && (n_out == 0 || codes0.scale == nullptr))
    return Status::error("residual_norms_cuda: codes for out[0] need an out[0] and a scale buffer");
  NormOuts o{};
  for (int j = 0; j < n_out; ++j) {
    o.w[j] = static_cast<const bf16*>(w_out[j]);
    o.y[j] = static_cast<bf16*>(out[j]);
  }
  o.codes[0] = static_cast<uint8_t*>(codes0.codes);
  o.scale[0] = codes0.scale;
  if (moe.r != nullptr) {
    if (n_out < 2 || moe.router_scale == nullptr || moe.z.codes == nullptr || moe.z.scale == nullptr ||
        !residual_codes_fit(dim, {moe.r, moe.router_scale}, moe.z.codes))
      return Status::error("residual_norms_cuda: the MoE's inputs need out[1] (z), the router's scale, z's code and "
                           "scale buffers, and the vectorised rows");
    o.codes[1] = static_cast<uint8_t*>(moe.z.codes);
    o.scale[1] = moe.z.scale;
    o.router_scale = static_cast<const bf16*>(moe.router_scale);
    o.r = static_cast<bf16*>(moe.r);
    o.root = moe.root;
  }
  if (residual_codes_fit(dim, {h, attn, w_post, h1, o.w[0], o.w[1], o.w[2], o.y[0], o.y[1], o.y[2], attn_raw.col},
                         codes0.codes)) {
    cuda::launch(residual_norms_vec_kernel, static_cast<unsigned>(rows), kThreads, 0, s,
                 static_cast<const bf16*>(h), static_cast<const bf16*>(attn), static_cast<const bf16*>(w_post),
                 static_cast<bf16*>(h1), o, n_out, dim, eps, attn_raw);
    return cuda_status(cudaGetLastError(), "residual_norms_cuda");
  }
  if (Status st = refuse_raw(attn_raw, "residual_norms_cuda"); !st.is_ok()) return st;
  if (codes0.codes != nullptr || moe.r != nullptr)
    return Status::error("residual_norms_cuda: out[0]'s codes and the MoE's inputs need rows of a multiple of 8 "
                         "elements up to 4,096, 16-byte aligned buffers and 8-byte aligned codes");
  if (Status st = with_smem(reinterpret_cast<const void*>(residual_norms_kernel), dim, "residual_norms_cuda");
      !st.is_ok())
    return st;
  cuda::launch(residual_norms_kernel, static_cast<unsigned>(rows), kThreads, static_cast<size_t>(dim * 4), s, 
      static_cast<const bf16*>(h), static_cast<const bf16*>(attn), static_cast<const bf16*>(w_post),
      static_cast<bf16*>(h1), o, n_out, dim, eps);
  return cuda_status(cudaGetLastError(), "residual_norms_cuda");
}

// The kernel's NextNorm of `next` and the dynamic shared memory it takes (none without one); an error where the
// buffers do not fit.
Status next_norm_args(const NextNormOut& next, int64_t dim, const char* what, NextNorm& nx, size_t& smem) {
  nx = NextNorm{static_cast<const bf16*>(next.w), static_cast<bf16*>(next.y),
                static_cast<uint8_t*>(next.codes.codes), next.codes.scale};
  smem = next.y != nullptr ? static_cast<size_t>(dim) * 4 : 0;
  if (next.y == nullptr || next_norm_fits(dim, next)) return Status::ok();
  return Status::error(std::string(what) + ": the next layer's input norm needs its weight, 16-byte aligned rows, "
                       "8-byte aligned codes with a scale buffer, and rows of a multiple of 8 elements up to 4,096");
}

Status ffn_tail_cuda(const void* h1, const void* m1, const void* w1, const void* m2, const void* w2, const void* w,
                     RowScalar scalar, void* out, int64_t rows, int64_t dim, float eps, cudaStream_t s,
                     RawRowScales m1_raw, NextNormOut next) {
  if (Status st = check_shape(rows, dim, "ffn_tail_cuda"); !st.is_ok()) return st;
  NextNorm nx;
  size_t smem = 0;
  if (Status st = next_norm_args(next, dim, "ffn_tail_cuda", nx, smem); !st.is_ok()) return st;
  if (vec_ok(dim, {h1, m1, w1, m2, w2, w, out, m1_raw.col})) {
    cuda::launch(ffn_tail_vec_kernel<RowsM2>, static_cast<unsigned>(rows), kThreads, smem, s,
                 static_cast<const bf16*>(h1), static_cast<const bf16*>(m1), static_cast<const bf16*>(w1),
                 RowsM2{static_cast<const bf16*>(m2)}, static_cast<const bf16*>(w2), static_cast<const bf16*>(w),
                 scalar, static_cast<bf16*>(out), dim, eps, m1_raw, nx);
    return cuda_status(cudaGetLastError(), "ffn_tail_cuda");
  }
  if (Status st = refuse_raw(m1_raw, "ffn_tail_cuda"); !st.is_ok()) return st;
  if (next.y != nullptr)
    return Status::error("ffn_tail_cuda: the next layer's input norm needs 16-byte aligned rows of a multiple of 8 "
                         "elements up to 4,096");
  if (Status st = with_smem(reinterpret_cast<const void*>(ffn_tail_kernel), dim, "ffn_tail_cuda"); !st.is_ok())
    return st;
  cuda::launch(ffn_tail_kernel, static_cast<unsigned>(rows), kThreads, static_cast<size_t>(dim * 4), s, 
      static_cast<const bf16*>(h1), static_cast<const bf16*>(m1), static_cast<const bf16*>(w1),
      static_cast<const bf16*>(m2), static_cast<const bf16*>(w2), static_cast<const bf16*>(w), scalar,
      static_cast<bf16*>(out), dim, eps);
  return cuda_status(cudaGetLastError(), "ffn_tail_cuda");
}

Status ffn_tail_moe_cuda(const void* h1, const void* m1, const void* w1, const void* y, const int32_t* inv,
                         const float* weight, int top_k, const void* w2, const void* w, RowScalar scalar, void* out,
                         int64_t rows, int64_t dim, float eps, cudaStream_t s, RawRowScales m1_raw,
                         NextNormOut next) {
  if (Status st = check_shape(rows, dim, "ffn_tail_moe_cuda"); !st.is_ok()) return st;
  NextNorm nx;
  size_t smem = 0;
  if (Status st = next_norm_args(next, dim, "ffn_tail_moe_cuda", nx, smem); !st.is_ok()) return st;
  if (!vec_ok(dim, {h1, m1, w1, y, w2, w, out, m1_raw.col}))
    return Status::error("ffn_tail_moe_cuda: rows of " + std::to_string(dim) +
                         " elements or unaligned buffers (take moe_combine_cuda, then ffn_tail_cuda)");
  const auto launch = [&](auto m2) {
    cuda::launch(ffn_tail_vec_kernel<decltype(m2)>, static_cast<unsigned>(rows), kThreads, smem, s,
                 static_cast<const bf16*>(h1), static_cast<const bf16*>(m1), static_cast<const bf16*>(w1), m2,
                 static_cast<const bf16*>(w2), static_cast<const bf16*>(w), scalar, static_cast<bf16*>(out), dim, eps,
                 m1_raw, nx);
  };
  const auto* yb = static_cast<const bf16*>(y);
  if (top_k == 8) {
    launch(CombinedM2<8>{yb, inv, weight, top_k});
  } else {
    launch(CombinedM2<0>{yb, inv, weight, top_k});
  }
  return cuda_status(cudaGetLastError(), "ffn_tail_moe_cuda");
}

bool residual_codes_fit(int64_t dim, std::initializer_list<const void*> ptrs, const void* codes) {
  return vec_ok(dim, ptrs) && (reinterpret_cast<uintptr_t>(codes) & 7) == 0;
}

bool residual_vec_fits(int64_t dim, std::initializer_list<const void*> ptrs) { return vec_ok(dim, ptrs); }

bool next_norm_fits(int64_t dim, const NextNormOut& next) {
  if (next.w == nullptr || !vec_ok(dim, {next.w, next.y})) return false;
  return next.codes.codes == nullptr ||
         (next.codes.scale != nullptr && (reinterpret_cast<uintptr_t>(next.codes.codes) & 7) == 0);
}

bool ffn_tail_moe_fits(int64_t dim, const void* h1, const void* m1, const void* w1, const void* y, const void* w2,
                       const void* w, const void* out) {
  return vec_ok(dim, {h1, m1, w1, y, w2, w, out});
}

}  // namespace dg
