#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "core/packed_layout.h"
#include "ops/linear/linear_cuda.h"

#include <cuda_fp8.h>

#include <string>

namespace dg {
namespace {

using cuda::bf16;

template <bool kFp8>
__device__ __forceinline__ bf16 code_value(uint8_t c) {
  if constexpr (kFp8) {
    __nv_fp8_e4m3 e;
    e.__x = c;
    return __float2bfloat16_rn(static_cast<float>(e));  // exact
  } else {
    return __float2bfloat16_rn(static_cast<float>(static_cast<int8_t>(c)));  // exact: |q| <= 127
  }
}

// Eight codes per thread (8-byte loads, 16-byte stores) where the count allows, else one.
template <bool kFp8>
__global__ void codes_kernel(const uint8_t* codes, int64_t n, bf16* out) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (n % 8 == 0) {
    if (8 * i >= n) return;
    const uint2 raw = reinterpret_cast<const uint2*>(codes)[i];
    const auto* b = reinterpret_cast<const uint8_t*>(&raw);
    uint4 o;
    auto* e = reinterpret_cast<bf16*>(&o);
#pragma unroll
    for (int j = 0; j < 8; ++j) e[j] = code_value<kFp8>(b[j]);
    reinterpret_cast<uint4*>(out)[i] = o;
  } else if (i < n) {
    out[i] = code_value<kFp8>(codes[i]);
  }
}

// Thread (x, y): column x of rows y, y + gridDim.y, ...
__global__ void epilogue_kernel(const float* acc, const uint8_t* scale_plane, int64_t row_bytes, int64_t rows,
                                int64_t n, bf16* y, const float* x_scale) {
  cuda::pdl_enter();
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= n) return;
  const float s = *reinterpret_cast<const float*>(scale_plane + c * row_bytes);
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float a = x_scale != nullptr ? acc[r * n + c] * x_scale[r] : acc[r * n + c];
    y[r * n + c] = __float2bfloat16_rn(a * s);
  }
}

Status check_format(DType fmt, const char* what) {
  if (fmt == DType::kQ8 || fmt == DType::kFp8) return Status::ok();
  return Status::error(std::string(what) + ": q8 or fp8 weights only");
}

}  // namespace

Status rowscaled_codes_bf16_cuda(const void* w, DType fmt, int64_t n, int64_t k, void* codes_bf16, cudaStream_t s) {
  if (Status st = check_format(fmt, "rowscaled_codes_bf16_cuda"); !st.is_ok()) return st;
  const int64_t count = n * k;  // the code plane: rows of k bytes from the tensor's start
  if (count == 0) return Status::ok();
  const int64_t threads = count % 8 == 0 ? count / 8 : count;
  const auto* codes = static_cast<const uint8_t*>(w);
  auto* out = static_cast<bf16*>(codes_bf16);
  if (fmt == DType::kFp8)
    cuda::launch(codes_kernel<true>, cuda::blocks_for(threads, 256), 256, 0, s, codes, count, out);
  else
    cuda::launch(codes_kernel<false>, cuda::blocks_for(threads, 256), 256, 0, s, codes, count, out);
  return cuda_status(cudaGetLastError(), "rowscaled_codes_bf16_cuda");
}

Status rowscaled_epilogue_cuda(const float* acc, const void* w, DType fmt, int64_t rows, int64_t n, int64_t k,
                               void* y, cudaStream_t s, const float* x_scale) {
  if (Status st = check_format(fmt, "rowscaled_epilogue_cuda"); !st.is_ok()) return st;
  if (rows * n == 0) return Status::ok();
  const PackedLayout L = packed_layout(fmt, Shape{n, k});
  const dim3 grid(cuda::blocks_for(n, 256), static_cast<unsigned>(rows < 65535 ? rows : 65535));
  cuda::launch(epilogue_kernel, grid, 256, 0, s, acc, static_cast<const uint8_t*>(w) + L.offset[1], L.row_bytes[1],
               rows, n, static_cast<bf16*>(y), x_scale);
  return cuda_status(cudaGetLastError(), "rowscaled_epilogue_cuda");
}

}  // namespace dg
