#include <mma.h>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/moe/moe_cuda.h"
#include "ops/rmsnorm/rmsnorm_cuda.h"
#include "ops/rmsnorm/warp_norm.cuh"

namespace dg {
namespace {

using cuda::bf16;

// One element of the router's input: the normed value times its scale (rounded to bf16), times hidden^-1/2.
__device__ __forceinline__ bf16 router_prepped(bf16 x, bf16 scale, float root) {
  return __float2bfloat16_rn(cuda::rbf(__bfloat162float(x) * __bfloat162float(scale)) * root);
}

__global__ void router_prep_kernel(bf16* x, const bf16* scale, int64_t hidden, float root, int64_t n) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  x[i] = router_prepped(x[i], scale[i % hidden], root);
}

// The same, eight elements per thread with 16-byte accesses (hidden % 8 == 0, aligned rows): block y is a row.
__global__ void router_prep_vec_kernel(uint4* x, const uint4* scale, int64_t chunks, float root) {
  cuda::pdl_enter();
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= chunks) return;
  uint4* row = x + static_cast<int64_t>(blockIdx.y) * chunks;
  uint4 raw = row[c];
  const uint4 sraw = scale[c];
  auto* e = reinterpret_cast<bf16*>(&raw);
  const auto* w = reinterpret_cast<const bf16*>(&sraw);
#pragma unroll
  for (int k = 0; k < 8; ++k) e[k] = router_prepped(e[k], w[k], root);
  row[c] = raw;
}

// The router's input in one pass: rmsnorm(h) without a weight (rmsnorm_vec_kernel's arithmetic: vec_norm_row) and
// router_prepped on each rounded value, a block per row.
__global__ void __launch_bounds__(norm::kVecThreads) router_input_kernel(const bf16* h, const bf16* scale, bf16* r,
                                                                          int dim, float eps, float root) {
  cuda::pdl_enter();
  __shared__ float warp_sums[norm::kVecThreads / 32];
  bf16* rr = r + blockIdx.x * static_cast<int64_t>(dim);
  norm::vec_norm_row(h + blockIdx.x * static_cast<int64_t>(dim), static_cast<const float*>(nullptr), dim, eps,
                     warp_sums, [&](int d0, uint4 raw) {
                       const uint4 sraw = *reinterpret_cast<const uint4*>(scale + d0);
                       auto* e = reinterpret_cast<bf16*>(&raw);
                       const auto* w = reinterpret_cast<const bf16*>(&sraw);
#pragma unroll
                       for (int k = 0; k < 8; ++k) e[k] = router_prepped(e[k], w[k], root);
                       *reinterpret_cast<uint4*>(rr + d0) = raw;
                     });
}

// One warp per row: softmax over the experts, then top_k rounds of a warp argmax (ties to the lower index).
__global__ void route_kernel(const bf16* scores, int64_t rows, int64_t n_exp, int top_k, const bf16* pes, int32_t* idx,
                             float* weight) {
  cuda::pdl_enter();
  extern __shared__ float smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x >> 5) + warp;
  if (r >= rows) return;
  float* p = smem + warp * n_exp;
  float mx = -INFINITY;
  for (int64_t e = lane; e < n_exp; e += 32) mx = fmaxf(mx, __bfloat162float(scores[r * n_exp + e]));
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  float sum = 0.0f;
  for (int64_t e = lane; e < n_exp; e += 32) {
    const float v = expf(__bfloat162float(scores[r * n_exp + e]) - mx);
    p[e] = v;
    sum += v;
  }
  sum = cuda::warp_sum(sum);
  for (int64_t e = lane; e < n_exp; e += 32) p[e] /= sum;
  __syncwarp();
  float wsum = 0.0f;
  for (int k = 0; k < top_k; ++k) {
    float best = -1.0f;
    int best_e = 0x7fffffff;
    for (int64_t e = lane; e < n_exp; e += 32)
      if (p[e] > best) {  // strict: within a lane the lower index wins ties
        best = p[e];
        best_e = static_cast<int>(e);
      }
    for (int off = 16; off > 0; off >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, off);
      const int oe = __shfl_xor_sync(0xffffffffu, best_e, off);
      if (ob > best || (ob == best && oe < best_e)) {
        best = ob;
        best_e = oe;
      }
    }
    if (lane == 0) {
      idx[r * top_k + k] = best_e;
      weight[r * top_k + k] = best;
      p[best_e] = -2.0f;  // taken
    }
    wsum += best;
    __syncwarp();
  }
  if (lane == 0)
    for (int k = 0; k < top_k; ++k) {
      const int e = idx[r * top_k + k];
      weight[r * top_k + k] = (weight[r * top_k + k] / wsum) * __bfloat162float(pes[e]);
    }
}

__global__ void group_count_kernel(const int32_t* idx, int64_t pairs, int64_t n_exp, int32_t* counts) {
  cuda::pdl_enter();
  const int lane = threadIdx.x & 31;
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (e >= n_exp) return;
  int c = 0;
  for (int64_t base = 0; base < pairs; base += 32) {
    const int64_t p = base + lane;
    c += __popc(__ballot_sync(0xffffffffu, p < pairs && idx[p] == e));
  }
  if (lane == 0) counts[e] = c;
}

__global__ void group_place_kernel(const int32_t* idx, int64_t pairs, int64_t n_exp, const int32_t* counts,
                                   int32_t* offsets, int32_t* perm, int32_t* inv) {
  cuda::pdl_enter();
  const int lane = threadIdx.x & 31;
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (e >= n_exp) return;
  int before = 0;
  for (int64_t j = lane; j < e; j += 32) before += counts[j];
  for (int off = 16; off > 0; off >>= 1) before += __shfl_xor_sync(0xffffffffu, before, off);
  int running = 0;
  for (int64_t base = 0; base < pairs; base += 32) {
    const int64_t p = base + lane;
    const bool hit = p < pairs && idx[p] == e;
    const unsigned mask = __ballot_sync(0xffffffffu, hit);
    if (hit) {
      const int pos = before + running + __popc(mask & ((1u << lane) - 1u));
      perm[pos] = static_cast<int32_t>(p);
      inv[p] = pos;
    }
    running += __popc(mask);
  }
  if (lane == 0) {
    offsets[e] = before;
    if (e == n_exp - 1) offsets[n_exp] = before + running;
  }
}

// The same stable grouping in one block of kGroupWarps warps, for n_exp <= kGroupMaxExperts: warp w owns a
// contiguous range of pairs (whole steps of 32, in order), so a pair's position is its expert's offset + the
// expert's pairs in earlier warps + those earlier in its own range + its rank among equal lanes of its step
// (__match_any_sync). Two passes over the range (count, place) and one scan, all in shared memory; no loop is
// longer than pairs / (32 * kGroupWarps) steps.
constexpr int kGroupWarps = 32;
constexpr int64_t kGroupMaxExperts = 256;

__global__ void __launch_bounds__(kGroupWarps * 32) group_block_kernel(const int32_t* idx, int64_t pairs, int n_exp,
                                                                      int32_t* counts, int32_t* offsets,
                                                                      int32_t* perm, int32_t* inv) {
  cuda::pdl_enter();
  extern __shared__ int32_t gsm[];
  int32_t* run = gsm;                      // [kGroupWarps][n_exp]: counts, then each warp's running base
  int32_t* off = gsm + kGroupWarps * n_exp;  // [n_exp]: expert totals, then offsets
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const unsigned lower = (1u << lane) - 1u;
  for (int i = threadIdx.x; i < kGroupWarps * n_exp; i += blockDim.x) run[i] = 0;
  __syncthreads();
  const int64_t per = (pairs + kGroupWarps * 32 - 1) / (kGroupWarps * 32) * 32;
  const int64_t begin = warp * per, end = begin + per < pairs ? begin + per : pairs;
  int32_t* mine = run + warp * n_exp;
  for (int64_t base = begin; base < end; base += 32) {
    const int64_t p = base + lane;
    const int e = p < end ? idx[p] : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    if (e >= 0 && (peers & lower) == 0) mine[e] += __popc(peers);  // the group's lowest lane counts it
    __syncwarp();
  }
  __syncthreads();
  for (int e = threadIdx.x; e < n_exp; e += blockDim.x) {  // per expert: exclusive prefix over the warps
    int32_t total = 0;
    for (int w = 0; w < kGroupWarps; ++w) {
      const int32_t c = run[w * n_exp + e];
      run[w * n_exp + e] = total;
      total += c;
    }
    counts[e] = total;
    off[e] = total;
  }
  __syncthreads();
  if (warp == 0) {  // exclusive scan of the counts: each lane a contiguous chunk of experts
    const int chunk = (n_exp + 31) / 32, e0 = lane * chunk, e1 = e0 + chunk < n_exp ? e0 + chunk : n_exp;
    int32_t sum = 0;
    for (int e = e0; e < e1; ++e) sum += off[e];
    int32_t incl = sum;
    for (int o = 1; o < 32; o <<= 1) {
      const int32_t v = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += v;
    }
    int32_t at = incl - sum;
    for (int e = e0; e < e1; ++e) {
      const int32_t c = off[e];
      off[e] = at;
      offsets[e] = at;
      at += c;
    }
    if (lane == 31) offsets[n_exp] = incl;
  }
  __syncthreads();
  for (int64_t base = begin; base < end; base += 32) {
    const int64_t p = base + lane;
    const int e = p < end ? idx[p] : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    if (e >= 0) {
      const int32_t pos = off[e] + mine[e] + __popc(peers & lower);
      perm[pos] = static_cast<int32_t>(p);
      inv[p] = pos;
    }
    __syncwarp();
    if (e >= 0 && (peers & lower) == 0) mine[e] += __popc(peers);
    __syncwarp();
  }
}

__global__ void gather_kernel(const bf16* x, const int32_t* perm, int top_k, int64_t hidden, bf16* xg, int64_t n) {
  cuda::pdl_enter();
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= n) return;
  const int64_t i = t / hidden, c = t % hidden;
  xg[t] = x[static_cast<int64_t>(perm[i] / top_k) * hidden + c];
}

// Rows of 16-byte chunks (hidden % 8 == 0, aligned rows): a block per gathered row, no division per element.
__global__ void gather_rows_kernel(const uint4* x, const int32_t* perm, int top_k, int64_t chunks, uint4* xg) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x;
  const uint4* src = x + static_cast<int64_t>(perm[i] / top_k) * chunks;
  uint4* dst = xg + i * chunks;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) dst[c] = src[c];
}

// Tensor-core path: a block owns (expert, 64 output columns); each of its 4 warps a 16-column slice; m-tiles of
// 16 rows walk the expert's rows. Requires K % 16 == 0 and N % 16 == 0.
__global__ void grouped_gemm_wmma_kernel(const bf16* x, int64_t K, const bf16* W, int64_t N, const int32_t* offsets,
                                         bf16* y) {
  cuda::pdl_enter();
  using namespace nvcuda;
  __shared__ __align__(32) float tile[4][16 * 16];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t e = blockIdx.y;
  const int64_t n0 = blockIdx.x * 64 + warp * 16;
  if (n0 >= N) return;
  const int64_t r0 = offsets[e], r1 = offsets[e + 1];
  const bf16* We = W + e * N * K + n0 * K;
  for (int64_t m0 = r0; m0 < r1; m0 += 16) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int64_t k = 0; k < K; k += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> a;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> b;
      wmma::load_matrix_sync(a, x + m0 * K + k, static_cast<unsigned>(K));
      wmma::load_matrix_sync(b, We + k, static_cast<unsigned>(K));
      wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(tile[warp], acc, 16, wmma::mem_row_major);
    __syncwarp();
    for (int t = lane; t < 256; t += 32) {
      const int64_t row = m0 + t / 16;
      if (row < r1) y[row * N + n0 + t % 16] = __float2bfloat16_rn(tile[warp][t]);
    }
    __syncwarp();
  }
}

// SIMT fallback for shapes that are not multiples of 16: one thread per output column, rows of the expert in turn.
__global__ void grouped_gemm_simt_kernel(const bf16* x, int64_t K, const bf16* W, int64_t N, const int32_t* offsets,
                                         bf16* y) {
  cuda::pdl_enter();
  const int64_t e = blockIdx.y;
  const int64_t n = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (n >= N) return;
  const bf16* w = W + (e * N + n) * K;
  for (int64_t i = offsets[e]; i < offsets[e + 1]; ++i) {
    float acc = 0.0f;
    for (int64_t k = 0; k < K; ++k) acc += __bfloat162float(x[i * K + k]) * __bfloat162float(w[k]);
    y[i * N + n] = __float2bfloat16_rn(acc);
  }
}

// out[r, c] = sum_k weight[r, k] y[inv[r, k], c]; a thread takes kVec consecutive columns (kVec 8: 16-byte loads).
template <int kVec>
__global__ void combine_kernel(const bf16* y, const int32_t* inv, const float* weight, int top_k, int64_t hidden,
                               bf16* out, int64_t n) {
  cuda::pdl_enter();
  const int64_t t = kVec * (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x);
  if (t >= n) return;
  const int64_t r = t / hidden, c = t % hidden;
  float acc[kVec] = {};
  for (int k = 0; k < top_k; ++k) {
    const float w = weight[r * top_k + k];
    const bf16* src = y + static_cast<int64_t>(inv[r * top_k + k]) * hidden + c;
    if constexpr (kVec == 8) {
      const uint4 v = *reinterpret_cast<const uint4*>(src);
      const auto* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 f = __bfloat1622float2(h[j]);
        acc[2 * j] += w * f.x;
        acc[2 * j + 1] += w * f.y;
      }
    } else {
      acc[0] += w * __bfloat162float(src[0]);
    }
  }
#pragma unroll
  for (int j = 0; j < kVec; ++j) out[t + j] = __float2bfloat16_rn(acc[j]);
}

}  // namespace

Status moe_router_input_cuda(const void* h, const void* scale, void* r, int64_t rows, int64_t hidden, float eps,
                             float root, cudaStream_t s) {
  if (rows == 0) return Status::ok();
  const bool aligned = ((reinterpret_cast<uintptr_t>(h) | reinterpret_cast<uintptr_t>(scale) |
                         reinterpret_cast<uintptr_t>(r)) & 15) == 0;
  if (hidden % 8 == 0 && hidden <= norm::kVecMaxDim && aligned && rows <= 0x7fffffff) {
    cuda::launch(router_input_kernel, static_cast<unsigned>(rows), norm::kVecThreads, 0, s,
                 static_cast<const bf16*>(h), static_cast<const bf16*>(scale), static_cast<bf16*>(r),
                 static_cast<int>(hidden), eps, root);
    return cuda_status(cudaGetLastError(), "moe_router_input_cuda");
  }
  if (Status st = rmsnorm_cuda(h, DType::kBF16, nullptr, DType::kBF16, r, DType::kBF16, rows, hidden, eps, s);
      !st.is_ok())
    return st;
  return moe_router_prep_cuda(r, scale, rows, hidden, root, s);
}

Status moe_router_prep_cuda(void* normed, const void* scale, int64_t rows, int64_t hidden, float root, cudaStream_t s) {
  const int64_t n = rows * hidden;
  if (n == 0) return Status::ok();
  const bool aligned = ((reinterpret_cast<uintptr_t>(normed) | reinterpret_cast<uintptr_t>(scale)) & 15) == 0;
  if (hidden % 8 == 0 && aligned && rows <= 65535) {
    const int64_t chunks = hidden / 8;
    const dim3 grid(static_cast<unsigned>((chunks + 127) / 128), static_cast<unsigned>(rows));
    cuda::launch(router_prep_vec_kernel, grid, 128, 0, s, static_cast<uint4*>(normed),
                 static_cast<const uint4*>(scale), chunks, root);
    return cuda_status(cudaGetLastError(), "moe_router_prep_cuda");
  }
  cuda::launch(router_prep_kernel, cuda::blocks_for(n, 256), 256, 0, s, static_cast<bf16*>(normed),
                                                              static_cast<const bf16*>(scale), hidden, root, n);
  return cuda_status(cudaGetLastError(), "moe_router_prep_cuda");
}

Status moe_route_cuda(const void* scores, int64_t rows, int64_t n_exp, int top_k, const void* per_expert_scale,
                      int32_t* idx, float* weight, cudaStream_t s) {
  if (rows == 0) return Status::ok();
  if (top_k < 1 || top_k > n_exp || n_exp > 1024) return Status::error("moe_route_cuda: bad expert counts");
  constexpr int kWarpsPerBlock = 4;
  const size_t smem = static_cast<size_t>(kWarpsPerBlock * n_exp) * sizeof(float);
  cuda::launch(route_kernel, cuda::blocks_for(rows, kWarpsPerBlock), kWarpsPerBlock * 32, smem, s, 
      static_cast<const bf16*>(scores), rows, n_exp, top_k, static_cast<const bf16*>(per_expert_scale), idx, weight);
  return cuda_status(cudaGetLastError(), "moe_route_cuda");
}

Status moe_group_cuda(const int32_t* idx, int64_t pairs, int64_t n_exp, int32_t* counts, int32_t* offsets,
                      int32_t* perm, int32_t* inv, cudaStream_t s) {
  if (pairs > INT32_MAX) return Status::error("moe_group_cuda: more than 2^31 routed pairs");
  if (n_exp <= kGroupMaxExperts) {
    const size_t smem = static_cast<size_t>((kGroupWarps + 1) * n_exp) * sizeof(int32_t);
    cuda::launch(group_block_kernel, 1, kGroupWarps * 32, smem, s, idx, pairs, static_cast<int>(n_exp), counts, offsets, perm,
                                                         inv);
    return cuda_status(cudaGetLastError(), "moe_group_cuda");
  }
  constexpr int kWarpsPerBlock = 8;
  const unsigned grid = cuda::blocks_for(n_exp, kWarpsPerBlock);
  cuda::launch(group_count_kernel, grid, kWarpsPerBlock * 32, 0, s, idx, pairs, n_exp, counts);
  cuda::launch(group_place_kernel, grid, kWarpsPerBlock * 32, 0, s, idx, pairs, n_exp, counts, offsets, perm, inv);
  return cuda_status(cudaGetLastError(), "moe_group_cuda");
}

Status moe_gather_cuda(const void* x, const int32_t* perm, int64_t pairs, int top_k, int64_t hidden, void* xg,
                       cudaStream_t s) {
  const int64_t n = pairs * hidden;
  if (n == 0) return Status::ok();
  if (hidden % 8 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(xg) % 16 == 0) {
    cuda::launch(gather_rows_kernel, static_cast<unsigned>(pairs), 128, 0, s, static_cast<const uint4*>(x), perm, top_k,
                                                                    hidden / 8, static_cast<uint4*>(xg));
    return cuda_status(cudaGetLastError(), "moe_gather_cuda");
  }
  cuda::launch(gather_kernel, cuda::blocks_for(n, 256), 256, 0, s, static_cast<const bf16*>(x), perm, top_k, hidden,
                                                         static_cast<bf16*>(xg), n);
  return cuda_status(cudaGetLastError(), "moe_gather_cuda");
}

Status moe_grouped_gemm_cuda(const void* x, int64_t K, const void* W, int64_t N, int64_t n_exp, const int32_t* offsets,
                             void* y, cudaStream_t s) {
  const auto* xx = static_cast<const bf16*>(x);
  const auto* ww = static_cast<const bf16*>(W);
  auto* yy = static_cast<bf16*>(y);
  if (K % 16 == 0 && N % 16 == 0) {
    const dim3 grid(static_cast<unsigned>((N + 63) / 64), static_cast<unsigned>(n_exp));
    cuda::launch(grouped_gemm_wmma_kernel, grid, 128, 0, s, xx, K, ww, N, offsets, yy);
  } else {
    const dim3 grid(static_cast<unsigned>((N + 63) / 64), static_cast<unsigned>(n_exp));
    cuda::launch(grouped_gemm_simt_kernel, grid, 64, 0, s, xx, K, ww, N, offsets, yy);
  }
  return cuda_status(cudaGetLastError(), "moe_grouped_gemm_cuda");
}

Status moe_combine_cuda(const void* y, const int32_t* inv, const float* weight, int64_t rows, int top_k, int64_t hidden,
                        void* out, cudaStream_t s) {
  const int64_t n = rows * hidden;
  if (n == 0) return Status::ok();
  const auto* yy = static_cast<const bf16*>(y);
  auto* o = static_cast<bf16*>(out);
  if (hidden % 8 == 0 && (reinterpret_cast<uintptr_t>(y) & 15) == 0)
    cuda::launch(combine_kernel<8>, cuda::blocks_for(n / 8, 256), 256, 0, s, yy, inv, weight, top_k, hidden, o, n);
  else
    cuda::launch(combine_kernel<1>, cuda::blocks_for(n, 256), 256, 0, s, yy, inv, weight, top_k, hidden, o, n);
  return cuda_status(cudaGetLastError(), "moe_combine_cuda");
}

}  // namespace dg
