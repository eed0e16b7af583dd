#include <cuda_fp8.h>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/e4m3.cuh"
#include "core/cuda/launch.cuh"
#include "core/cuda/e4m3_rows.cuh"
#include "ops/moe/moe_cuda.h"

namespace dg {
namespace {

using cuda::bf16;

using cuda::e4m3_of;

// One warp per row: the row's amax, then each element divided by amax / 448 and rounded to E4M3 (as
// encode_fp8_rows). With `vec` (K a multiple of 8, x and q 16-byte aligned) rows move as 16-byte loads and 8-byte
// stores (the second pass reads what the first left in L1).

__global__ void act_quant_fp8_kernel(const bf16* x, int64_t rows, int64_t K, bool vec, uint8_t* q, float* scale) {
  cuda::pdl_enter();
  const int lane = threadIdx.x & 31;
  const int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (r >= rows) return;
  const bf16* xr = x + r * K;
  uint8_t* qr = q + r * K;
  float amax = 0.0f;
  if (vec) {
    for (int64_t k = 8 * lane; k < K; k += 256) {
      const uint4 raw = *reinterpret_cast<const uint4*>(xr + k);
      const bf16* e = reinterpret_cast<const bf16*>(&raw);
#pragma unroll
      for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(__bfloat162float(e[i])));
    }
  } else {
    for (int64_t k = lane; k < K; k += 32) amax = fmaxf(amax, fabsf(__bfloat162float(xr[k])));
  }
  for (int off = 16; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  const float s = amax / 448.0f;
  if (vec) {
    for (int64_t k = 8 * lane; k < K; k += 256) {
      const uint4 raw = *reinterpret_cast<const uint4*>(xr + k);
      const bf16* e = reinterpret_cast<const bf16*>(&raw);
      uint2 o;
      auto* ob = reinterpret_cast<uint8_t*>(&o);
#pragma unroll
      for (int i = 0; i < 8; ++i) ob[i] = e4m3_of(__bfloat162float(e[i]), s);
      *reinterpret_cast<uint2*>(qr + k) = o;
    }
  } else {
    for (int64_t k = lane; k < K; k += 32) qr[k] = e4m3_of(__bfloat162float(xr[k]), s);
  }
  if (lane == 0) scale[r] = s;
}

template <int kT>
__global__ void __launch_bounds__(kT < 128 ? 128 : kT)
    act_quant_fp8_reg_kernel(const bf16* x, int64_t rows, int64_t chunks, uint8_t* q, float* scale) {
  cuda::pdl_enter();
  constexpr int kBlock = kT < 128 ? 128 : kT;
  __shared__ float red[kBlock / 32];
  act_quant_row_reg<kT>(x, rows, chunks, q, scale, blockIdx.x * static_cast<int64_t>(kBlock / kT) + threadIdx.x / kT,
                        static_cast<int>(threadIdx.x) % kT, red);
}

}  // namespace

Status moe_act_quant_fp8_cuda(const void* x, int64_t rows, int64_t K, void* q, float* scale, cudaStream_t s) {
  if (rows == 0) return Status::ok();
  constexpr int kWarpsPerBlock = 4;
  const bool vec = K % 8 == 0 && ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(q)) & 15) == 0;
  const int64_t chunks = K / 8;
  if (vec && chunks <= 256 * kActPer) {  // the row fits in its threads' registers
    const auto xx = static_cast<const bf16*>(x);
    auto* qq = static_cast<uint8_t*>(q);
    auto rows_per = [&](int t) { return cuda::blocks_for(rows, (t < 128 ? 128 : t) / t); };
    if (chunks <= 32 * kActPer)
      cuda::launch(act_quant_fp8_reg_kernel<32>, rows_per(32), 128, 0, s, xx, rows, chunks, qq, scale);
    else if (chunks <= 64 * kActPer)
      cuda::launch(act_quant_fp8_reg_kernel<64>, rows_per(64), 128, 0, s, xx, rows, chunks, qq, scale);
    else if (chunks <= 128 * kActPer)
      cuda::launch(act_quant_fp8_reg_kernel<128>, rows_per(128), 128, 0, s, xx, rows, chunks, qq, scale);
    else
      cuda::launch(act_quant_fp8_reg_kernel<256>, rows_per(256), 256, 0, s, xx, rows, chunks, qq, scale);
    return cuda_status(cudaGetLastError(), "moe_act_quant_fp8_cuda");
  }
  cuda::launch(act_quant_fp8_kernel, cuda::blocks_for(rows, kWarpsPerBlock), kWarpsPerBlock * 32, 0, s, 
      static_cast<const bf16*>(x), rows, K, vec, static_cast<uint8_t*>(q), scale);
  return cuda_status(cudaGetLastError(), "moe_act_quant_fp8_cuda");
}

}  // namespace dg
