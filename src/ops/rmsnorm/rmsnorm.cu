#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/e4m3_rows.cuh"
#include "core/cuda/launch.cuh"
#include "ops/rmsnorm/rmsnorm_cuda.h"
#include "ops/rmsnorm/warp_norm.cuh"

#include <string>

namespace dg {
namespace {

using cuda::from_f32;
using norm::load8;
using cuda::to_f32;

constexpr int kThreads = 256;

template <typename TX, typename TW, typename TY>
__global__ void rmsnorm_kernel(const TX* __restrict__ x, const TW* __restrict__ w, TY* __restrict__ y, int64_t dim,
                               float eps) {
  cuda::pdl_enter();
  const int64_t row = blockIdx.x;
  const TX* xr = x + row * dim;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
    const float v = to_f32(xr[i]);
    ss += v * v;
  }
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  __shared__ float warp_sums[kThreads / 32];
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = ss;
  __syncthreads();
  if (threadIdx.x < 32) {
    float t = threadIdx.x < kThreads / 32 ? warp_sums[threadIdx.x] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) t += __shfl_xor_sync(0xffffffffu, t, off);
    if (threadIdx.x == 0) warp_sums[0] = t;
  }
  __syncthreads();
  const float inv = rsqrtf(warp_sums[0] / static_cast<float>(dim) + eps);
  TY* yr = y + row * dim;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
    float v = to_f32(xr[i]) * inv;
    if (w != nullptr) v *= to_f32(w[i]);
    yr[i] = from_f32<TY>(v);
  }
}

// bf16 rows of up to kVecMaxDim elements (the hidden-size norms): one block per row (warp_norm.cuh's vec_norm_row),
// a weight in bf16 or f32 or none.
using norm::kVecMaxDim;
using norm::kVecThreads;

template <typename TW>
__global__ void __launch_bounds__(kVecThreads) rmsnorm_vec_kernel(const cuda::bf16* __restrict__ x,
                                                                  const TW* __restrict__ w, cuda::bf16* __restrict__ y,
                                                                  int dim, float eps) {
  cuda::pdl_enter();
  __shared__ float warp_sums[kVecThreads / 32];
  cuda::bf16* yr = y + blockIdx.x * static_cast<int64_t>(dim);
  norm::vec_norm_row(x + blockIdx.x * static_cast<int64_t>(dim), w, dim, eps, warp_sums,
                     [&](int, int d0, const uint4& raw) { *reinterpret_cast<uint4*>(yr + d0) = raw; });
}

// bf16 rows of at most kWarpMaxDim elements: one warp per row (warp_norm.cuh), with kRope the normed row rotated at
// position pos0 + row / heads.
constexpr int kRowsPerBlock = 8;

template <bool kRope>
__global__ void rmsnorm_warp_kernel(const cuda::bf16* __restrict__ x, const cuda::bf16* __restrict__ w,
                                    cuda::bf16* __restrict__ y, int64_t rows, int dim, float eps, int64_t heads,
                                    int64_t pos0, const float* __restrict__ inv_freq) {
  cuda::pdl_enter();
  __shared__ float normed[kRope ? kRowsPerBlock : 1][kRope ? norm::kWarpMaxDim : 1];
  const int wi = threadIdx.x >> 5;
  const int64_t row = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + wi;
  if (row >= rows) return;
  norm::warp_norm_row<kRope>(x + row * dim, w, y + row * dim, dim, eps, kRope,
                             static_cast<float>(pos0 + row / heads), inv_freq, normed[wi]);
}

// rmsnorm_vec_kernel and rmsnorm_warp_kernel<false> followed by act_quant_fp8_reg_kernel's codes of the rows they
// wrote, from the stored bf16 values: the vector form keeps its chunks in registers (chunk t + s kT of thread t, as
// act_quant_row_vals takes them), the warp form re-reads the chunks each lane stored.
__global__ void __launch_bounds__(kVecThreads)
    rmsnorm_vec_codes_kernel(const cuda::bf16* __restrict__ x, const cuda::bf16* __restrict__ w, cuda::bf16* y,
                             int dim, float eps, uint8_t* codes, float* scale) {
  cuda::pdl_enter();
  __shared__ float warp_sums[kVecThreads / 32];
  __shared__ float red[kVecThreads / 32];
  cuda::bf16* yr = y + blockIdx.x * static_cast<int64_t>(dim);
  static_assert(norm::kVecPer == kActPer, "the norm's chunks are the codes' chunks");
  uint4 held[norm::kVecPer];
#pragma unroll
  for (int s = 0; s < norm::kVecPer; ++s) held[s] = make_uint4(0, 0, 0, 0);
  norm::vec_norm_row(x + blockIdx.x * static_cast<int64_t>(dim), w, dim, eps, warp_sums,
                     [&](int s, int d0, const uint4& raw) {
                       *reinterpret_cast<uint4*>(yr + d0) = raw;
                       held[s] = raw;
                     });
  act_quant_row_vals<kVecThreads>(held, true, dim / 8, codes, scale, blockIdx.x, static_cast<int>(threadIdx.x), red);
}

__global__ void rmsnorm_warp_codes_kernel(const cuda::bf16* __restrict__ x, const cuda::bf16* __restrict__ w,
                                          cuda::bf16* y, int64_t rows, int dim, float eps, uint8_t* codes,
                                          float* scale) {
  cuda::pdl_enter();
  const int wi = threadIdx.x >> 5;
  const int64_t row = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + wi;
  if (row >= rows) return;  // a whole warp: act_quant_row_reg<32> synchronises nothing beyond it
  norm::warp_norm_row<false>(x + row * dim, w, y + row * dim, dim, eps, false, 0.0f, nullptr, nullptr);
  act_quant_row_reg<32>(y, rows, dim / 8, codes, scale, row, static_cast<int>(threadIdx.x & 31), nullptr);
}

// Rows of 16-byte chunks (dim a multiple of 8, x, w and y 16-byte aligned; w may be null) of at most max_dim.
bool chunked_rows(const void* x, const void* w, const void* y, int64_t dim, int64_t max_dim) {
  return dim % 8 == 0 && dim <= max_dim &&
         ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
}
bool warp_shape(const void* x, const void* w, const void* y, int64_t dim) {
  return chunked_rows(x, w, y, dim, norm::kWarpMaxDim);
}

template <typename TW>
Status launch_vec(const void* x, const TW* w, void* y, int64_t rows, int64_t dim, float eps, cudaStream_t s) {
  cuda::launch(rmsnorm_vec_kernel<TW>, static_cast<unsigned>(rows), kVecThreads, 0, s, 
      static_cast<const cuda::bf16*>(x), w, static_cast<cuda::bf16*>(y), static_cast<int>(dim), eps);
  return cuda_status(cudaGetLastError(), "rmsnorm_cuda launch");
}

template <bool kRope>
Status launch_warp(const void* x, const void* w, void* y, int64_t rows, int64_t dim, float eps, int64_t heads,
                   int64_t pos0, const float* inv_freq, cudaStream_t s) {
  const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  cuda::launch(rmsnorm_warp_kernel<kRope>, blocks, kRowsPerBlock * 32, 0, s, 
      static_cast<const cuda::bf16*>(x), static_cast<const cuda::bf16*>(w), static_cast<cuda::bf16*>(y), rows,
      static_cast<int>(dim), eps, heads, pos0, inv_freq);
  return cuda_status(cudaGetLastError(), kRope ? "rmsnorm_rope_cuda" : "rmsnorm_cuda launch");
}

template <typename TX, typename TW, typename TY>
Status launch(const void* x, const void* w, void* y, int64_t rows, int64_t dim, float eps, cudaStream_t s) {
  cuda::launch(rmsnorm_kernel<TX, TW, TY>, static_cast<unsigned>(rows), kThreads, 0, s, 
      static_cast<const TX*>(x), static_cast<const TW*>(w), static_cast<TY*>(y), dim, eps);
  return cuda_status(cudaGetLastError(), "rmsnorm_cuda launch");
}

template <typename TX, typename TY>
Status dispatch_w(const void* x, const void* w, DType wt, void* y, int64_t rows, int64_t dim, float eps,
                  cudaStream_t s) {
  switch (wt) {
    case DType::kBF16: return launch<TX, __nv_bfloat16, TY>(x, w, y, rows, dim, eps, s);
    case DType::kF16: return launch<TX, __half, TY>(x, w, y, rows, dim, eps, s);
    case DType::kF32: return launch<TX, float, TY>(x, w, y, rows, dim, eps, s);
    default: return Status::error("rmsnorm_cuda: weight dtype must be bf16, f16 or f32");
  }
}

template <typename TX>
Status dispatch_y(const void* x, const void* w, DType wt, void* y, DType yt, int64_t rows, int64_t dim, float eps,
                  cudaStream_t s) {
  switch (yt) {
    case DType::kBF16: return dispatch_w<TX, __nv_bfloat16>(x, w, wt, y, rows, dim, eps, s);
    case DType::kF16: return dispatch_w<TX, __half>(x, w, wt, y, rows, dim, eps, s);
    case DType::kF32: return dispatch_w<TX, float>(x, w, wt, y, rows, dim, eps, s);
    default: return Status::error("rmsnorm_cuda: output dtype must be bf16, f16 or f32");
  }
}

}  // namespace

Status rmsnorm_cuda(const void* x, DType xt, const void* w, DType wt, void* y, DType yt, int64_t rows, int64_t dim,
                    float eps, cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return Status::error("rmsnorm_cuda: empty shape");
  if (rows > 0x7fffffff) return Status::error("rmsnorm_cuda: too many rows for one grid");
  if (x == nullptr || y == nullptr) return Status::error("rmsnorm_cuda: null input or output");
  if (w == nullptr) wt = DType::kF32;
  if (xt == DType::kBF16 && yt == DType::kBF16 && (w == nullptr || wt == DType::kBF16) && warp_shape(x, w, y, dim))
    return launch_warp<false>(x, w, y, rows, dim, eps, 1, 0, nullptr, stream);
  if (xt == DType::kBF16 && yt == DType::kBF16 && (wt == DType::kBF16 || wt == DType::kF32) && chunked_rows(x, w, y, dim, kVecMaxDim))
    return wt == DType::kBF16 ? launch_vec(x, static_cast<const cuda::bf16*>(w), y, rows, dim, eps, stream)
                              : launch_vec(x, static_cast<const float*>(w), y, rows, dim, eps, stream);
  switch (xt) {
    case DType::kBF16: return dispatch_y<__nv_bfloat16>(x, w, wt, y, yt, rows, dim, eps, stream);
    case DType::kF16: return dispatch_y<__half>(x, w, wt, y, yt, rows, dim, eps, stream);
    case DType::kF32: return dispatch_y<float>(x, w, wt, y, yt, rows, dim, eps, stream);
    default: return Status::error("rmsnorm_cuda: input dtype must be bf16, f16 or f32");
  }
}

bool rmsnorm_codes_fits(const void* x, const void* w, const void* y, const void* codes, int64_t dim) {
  return w != nullptr && chunked_rows(x, w, y, dim, kVecMaxDim) && (reinterpret_cast<uintptr_t>(codes) & 7) == 0;
}

Status rmsnorm_codes_cuda(const void* x, const void* w, void* y, int64_t rows, int64_t dim, float eps, void* codes,
                          float* scale, cudaStream_t stream) {
  if (rows <= 0 || rows > 0x7fffffff) return Status::error("rmsnorm_codes_cuda: rows must be from 1 to 2^31 - 1");
  if (!rmsnorm_codes_fits(x, w, y, codes, dim))
    return Status::error("rmsnorm_codes_cuda: dim " + std::to_string(dim) + " must be a multiple of 8 up to " +
                         std::to_string(kVecMaxDim) + ", with a weight and 16-byte aligned rows (8-byte codes)");
  const auto* xx = static_cast<const cuda::bf16*>(x);
  const auto* ww = static_cast<const cuda::bf16*>(w);
  auto* yy = static_cast<cuda::bf16*>(y);
  auto* cc = static_cast<uint8_t*>(codes);
  if (warp_shape(x, w, y, dim)) {  // the rows rmsnorm_cuda norms a warp each
    const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
    cuda::launch(rmsnorm_warp_codes_kernel, blocks, kRowsPerBlock * 32, 0, stream, xx, ww, yy, rows,
                 static_cast<int>(dim), eps, cc, scale);
  } else {
    cuda::launch(rmsnorm_vec_codes_kernel, static_cast<unsigned>(rows), kVecThreads, 0, stream, xx, ww, yy,
                 static_cast<int>(dim), eps, cc, scale);
  }
  return cuda_status(cudaGetLastError(), "rmsnorm_codes_cuda");
}

Status rmsnorm_rope_cuda(const void* x, const void* w, void* y, int64_t rows, int64_t heads, int64_t dim, float eps,
                         int64_t pos0, const float* inv_freq, cudaStream_t stream) {
  if (rows <= 0 || heads <= 0 || dim <= 0) return Status::error("rmsnorm_rope_cuda: empty shape");
  if (!warp_shape(x, w, y, dim) || dim % 16 != 0)
    return Status::error("rmsnorm_rope_cuda: head_dim " + std::to_string(dim) +
                         " must be a multiple of 16 up to 1024, with 16-byte aligned rows and weight");
  if (rows * heads / kRowsPerBlock >= 0x7fffffff) return Status::error("rmsnorm_rope_cuda: too many rows");
  return launch_warp<true>(x, w, y, rows * heads, dim, eps, heads, pos0, inv_freq, stream);
}

}  // namespace dg
