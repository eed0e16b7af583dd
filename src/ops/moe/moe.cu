#include <mma.h>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "core/cuda/e4m3_rows.cuh"
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

// Row blockIdx.x of the router's input: rmsnorm(h) without a weight (rmsnorm_vec_kernel's arithmetic:
// vec_norm_row) and router_prepped on each rounded value, the scale loaded with the row. The whole block calls it;
// warp_sums: its shared [kVecThreads / 32]; prefetch(s, d0): the caller's own loads, issued with the row's.
template <typename Prefetch = norm::NoPrefetch>
__device__ __forceinline__ void router_input_row(const bf16* h, const bf16* scale, bf16* r, int dim, float eps,
                                                 float root, float* warp_sums, Prefetch prefetch = {}) {
  bf16* rr = r + blockIdx.x * static_cast<int64_t>(dim);
  uint4 sraw[norm::kVecPer];
  norm::vec_norm_row(
      h + blockIdx.x * static_cast<int64_t>(dim), static_cast<const float*>(nullptr), dim, eps, warp_sums,
      [&](int s, int d0, uint4 raw) {
        auto* e = reinterpret_cast<bf16*>(&raw);
        const auto* w = reinterpret_cast<const bf16*>(&sraw[s]);
#pragma unroll
        for (int k = 0; k < 8; ++k) e[k] = router_prepped(e[k], w[k], root);
        *reinterpret_cast<uint4*>(rr + d0) = raw;
      },
      [&](int s, int d0) {
        sraw[s] = *reinterpret_cast<const uint4*>(scale + d0);
        prefetch(s, d0);
      });
}

// The router's input in one pass, a block per row.
__global__ void __launch_bounds__(norm::kVecThreads) router_input_kernel(const bf16* h, const bf16* scale, bf16* r,
                                                                          int dim, float eps, float root) {
  cuda::pdl_enter();
  __shared__ float warp_sums[norm::kVecThreads / 32];
  router_input_row(h, scale, r, dim, eps, root, warp_sums);
}

// The W8A8 MoE's two inputs in one launch, a block per row: the router's input of h (router_input_kernel) and z's
// E4M3 codes and scale (act_quant_fp8_reg_kernel<128>), the same arithmetic as the two kernels; z's chunks are
// loaded with h's (chunk t + s kT of thread t, as act_quant_row_vals takes them).
__global__ void __launch_bounds__(norm::kVecThreads)
    moe_inputs_fp8_kernel(const bf16* h, const bf16* scale, bf16* r, int dim, float eps, float root, const bf16* z,
                          uint8_t* zq, float* zs) {
  cuda::pdl_enter();
  __shared__ float warp_sums[norm::kVecThreads / 32];
  __shared__ float red[norm::kVecThreads / 32];
  static_assert(norm::kVecPer == kActPer, "the norm's chunks are the codes' chunks");
  uint4 zv[norm::kVecPer];
#pragma unroll
  for (int s = 0; s < norm::kVecPer; ++s) zv[s] = make_uint4(0, 0, 0, 0);
  const bf16* zr = z + blockIdx.x * static_cast<int64_t>(dim);
  router_input_row(h, scale, r, dim, eps, root, warp_sums,
                   [&](int s, int d0) { zv[s] = *reinterpret_cast<const uint4*>(zr + d0); });
  act_quant_row_vals<norm::kVecThreads>(zv, true, dim / 8, zq, zs, blockIdx.x, static_cast<int>(threadIdx.x), red);
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

Status moe_inputs_fp8_cuda(const void* h, const void* scale, void* r, int64_t rows, int64_t hidden, float eps,
                           float root, const void* z, void* zq, float* zs, cudaStream_t s) {
  if (rows == 0) return Status::ok();
  const bool aligned = ((reinterpret_cast<uintptr_t>(h) | reinterpret_cast<uintptr_t>(scale) |
                         reinterpret_cast<uintptr_t>(r) | reinterpret_cast<uintptr_t>(z) |
                         reinterpret_cast<uintptr_t>(zq)) & 15) == 0;
  static_assert(norm::kVecMaxDim == 8 * norm::kVecThreads * kActPer, "a row's chunks fit the block's registers");
  if (hidden % 8 == 0 && hidden <= norm::kVecMaxDim && aligned && rows <= 0x7fffffff) {
    cuda::launch(moe_inputs_fp8_kernel, static_cast<unsigned>(rows), norm::kVecThreads, 0, s,
                 static_cast<const bf16*>(h), static_cast<const bf16*>(scale), static_cast<bf16*>(r),
                 static_cast<int>(hidden), eps, root, static_cast<const bf16*>(z), static_cast<uint8_t*>(zq), zs);
    return cuda_status(cudaGetLastError(), "moe_inputs_fp8_cuda");
  }
  if (Status st = moe_router_input_cuda(h, scale, r, rows, hidden, eps, root, s); !st.is_ok()) return st;
  return moe_act_quant_fp8_cuda(z, rows, hidden, zq, zs, s);
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
