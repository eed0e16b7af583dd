#include <string>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/e4m3_rows.cuh"
#include "core/cuda/launch.cuh"
#include "ops/glu/glu_cuda.h"

namespace dg {
namespace {

using cuda::bf16;

__global__ void gelu_mul_kernel(const bf16* gate, const bf16* up, bf16* out, int64_t n) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float g = cuda::rbf(cuda::gelu_tanh(__bfloat162float(gate[i])));
  out[i] = __float2bfloat16_rn(g * __bfloat162float(up[i]));
}

__global__ void gelu_mul_split_kernel(const bf16* gu, int64_t ff, bf16* out, int64_t n) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int64_t r = i / ff, f = i % ff;
  const float g = cuda::rbf(cuda::gelu_tanh(__bfloat162float(gu[r * 2 * ff + f])));
  out[i] = __float2bfloat16_rn(g * __bfloat162float(gu[r * 2 * ff + ff + f]));
}

__global__ void gelu_mul_split_scaled_kernel(const bf16* gu, int64_t ff, int64_t ld, int64_t up_col, const float* xs,
                                             const float* gs, const float* us, bf16* out, int64_t n) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int64_t r = i / ff, f = i % ff;
  const float x = xs[r];
  const float g = cuda::rbf(cuda::gelu_tanh(__bfloat162float(gu[r * ld + f]) * x * gs[f]));
  out[i] = __float2bfloat16_rn(g * (__bfloat162float(gu[r * ld + up_col + f]) * x * us[f]));
}

// gelu_mul_split_scaled_kernel's values of row blockIdx.x, eight columns a 16-byte chunk (chunk t + i kT of thread
// t, as act_quant_row_vals takes them): every chunk's loads first, then the values stored and their E4M3 codes taken
// from the rounded values held in registers.
constexpr int kCodesThreads = 128;

__global__ void __launch_bounds__(kCodesThreads)
    gelu_mul_split_scaled_codes_kernel(const bf16* gu, int64_t ff, int64_t ld, int64_t up_col, const float* xs,
                                       const float* gs, const float* us, bf16* out, uint8_t* codes, float* scale) {
  cuda::pdl_enter();
  __shared__ float red[kCodesThreads / 32];
  const int64_t r = blockIdx.x, chunks = ff / 8;
  const int t = static_cast<int>(threadIdx.x);
  const float x = xs[r];
  const bf16* row = gu + r * ld;
  uint4 graw[kActPer], uraw[kActPer], o[kActPer];
  float gsv[kActPer][8], usv[kActPer][8];
#pragma unroll
  for (int i = 0; i < kActPer; ++i) {
    const int64_t c = t + i * kCodesThreads;
    o[i] = make_uint4(0, 0, 0, 0);
    if (c >= chunks) continue;
    graw[i] = *reinterpret_cast<const uint4*>(row + 8 * c);
    uraw[i] = *reinterpret_cast<const uint4*>(row + up_col + 8 * c);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      gsv[i][j] = gs[8 * c + j];
      usv[i][j] = us[8 * c + j];
    }
  }
#pragma unroll
  for (int i = 0; i < kActPer; ++i) {
    const int64_t c = t + i * kCodesThreads;
    if (c >= chunks) continue;
    const bf16* ge = reinterpret_cast<const bf16*>(&graw[i]);
    const bf16* ue = reinterpret_cast<const bf16*>(&uraw[i]);
    bf16* oe = reinterpret_cast<bf16*>(&o[i]);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float g = cuda::rbf(cuda::gelu_tanh(__bfloat162float(ge[j]) * x * gsv[i][j]));
      oe[j] = __float2bfloat16_rn(g * (__bfloat162float(ue[j]) * x * usv[i][j]));
    }
    *reinterpret_cast<uint4*>(out + r * ff + 8 * c) = o[i];
  }
  act_quant_row_vals<kCodesThreads>(o, true, chunks, codes, scale, r, t, red);
}

}  // namespace

Status gelu_mul_cuda(const void* gate, const void* up, void* out, int64_t n, cudaStream_t s) {
  if (n == 0) return Status::ok();
  cuda::launch(gelu_mul_kernel, cuda::blocks_for(n, 256), 256, 0, s, static_cast<const bf16*>(gate),
                                                           static_cast<const bf16*>(up), static_cast<bf16*>(out), n);
  return cuda_status(cudaGetLastError(), "gelu_mul_cuda");
}

Status gelu_mul_split_cuda(const void* gate_up, int64_t rows, int64_t ff, void* out, cudaStream_t s) {
  const int64_t n = rows * ff;
  if (n == 0) return Status::ok();
  cuda::launch(gelu_mul_split_kernel, cuda::blocks_for(n, 256), 256, 0, s, static_cast<const bf16*>(gate_up), ff,
                                                                 static_cast<bf16*>(out), n);
  return cuda_status(cudaGetLastError(), "gelu_mul_split_cuda");
}

Status gelu_mul_split_scaled_cuda(const void* gate_up, int64_t rows, int64_t ff, int64_t ld, int64_t up_col,
                                  const float* x_scale, const float* gate_scale, const float* up_scale, void* out,
                                  cudaStream_t s) {
  const int64_t n = rows * ff;
  if (n == 0) return Status::ok();
  if (up_col < ff || ld < up_col + ff) return Status::error("gelu_mul_split_scaled_cuda: up's columns overlap gate's "
                                                          "or pass the row");
  cuda::launch(gelu_mul_split_scaled_kernel, cuda::blocks_for(n, 256), 256, 0, s, static_cast<const bf16*>(gate_up),
               ff, ld, up_col, x_scale, gate_scale, up_scale, static_cast<bf16*>(out), n);
  return cuda_status(cudaGetLastError(), "gelu_mul_split_scaled_cuda");
}

bool gelu_mul_split_scaled_codes_fits(const void* gate_up, int64_t ff, int64_t ld, int64_t up_col, const void* out,
                                      const void* codes) {
  return ff % 8 == 0 && ff / 8 <= kCodesThreads * kActPer && ld % 8 == 0 && up_col % 8 == 0 &&
         ((reinterpret_cast<uintptr_t>(gate_up) | reinterpret_cast<uintptr_t>(out)) & 15) == 0 &&
         (reinterpret_cast<uintptr_t>(codes) & 7) == 0;
}

Status gelu_mul_split_scaled_codes_cuda(const void* gate_up, int64_t rows, int64_t ff, int64_t ld, int64_t up_col,
                                        const float* x_scale, const float* gate_scale, const float* up_scale,
                                        void* out, void* codes, float* scale, cudaStream_t s) {
  if (rows == 0) return Status::ok();
  if (rows < 0 || rows > 0x7fffffff) return Status::error("gelu_mul_split_scaled_codes_cuda: rows out of range");
  if (up_col < ff || ld < up_col + ff)
    return Status::error("gelu_mul_split_scaled_codes_cuda: up's columns overlap gate's or pass the row");
  if (!gelu_mul_split_scaled_codes_fits(gate_up, ff, ld, up_col, out, codes))
    return Status::error("gelu_mul_split_scaled_codes_cuda: ff " + std::to_string(ff) + " must be a multiple of 8 "
                         "up to 4,096, ld and up_col multiples of 8, 16-byte aligned rows and 8-byte aligned codes");
  cuda::launch(gelu_mul_split_scaled_codes_kernel, static_cast<unsigned>(rows), kCodesThreads, 0, s,
               static_cast<const bf16*>(gate_up), ff, ld, up_col, x_scale, gate_scale, up_scale,
               static_cast<bf16*>(out), static_cast<uint8_t*>(codes), scale);
  return cuda_status(cudaGetLastError(), "gelu_mul_split_scaled_codes_cuda");
}

}  // namespace dg
