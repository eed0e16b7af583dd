// Synthetic packed weights for full-shape benchmarks without a checkpoint: random codes and finite scales written
// straight into a packed tensor's planes (src/core/packed_layout.h), so every decoded weight lies in [-amax, amax].
// No CPU twin: benchmarks only time these weights; the kernels' numerics are tested on packed real values.
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "core/packed_layout.h"
#include "ops/elementwise/elementwise.h"

namespace dg {
namespace {

using cuda::bf16;

__device__ uint32_t hash32(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;  // splitmix64
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<uint32_t>((z ^ (z >> 31)) >> 32);
}

// Codes: any byte, except E4M3's NaN (fp8) and int8's -128 (q8).
__global__ void fill_codes_kernel(uint8_t* p, int64_t n, DType fmt, uint64_t seed) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  uint8_t b = static_cast<uint8_t>(hash32(seed, static_cast<uint64_t>(i)));
  if (fmt == DType::kFp8 && (b & 0x7f) == 0x7f) b ^= 1;
  if (fmt == DType::kQ8 && b == 0x80) b = 0x81;
  p[i] = b;
}

// Scale plane entries: q4 (bf16 scale, bf16 min) per group with min = -7.5 scale; fp8 / q8 f32 per row;
// nvfp4 an E4M3 block scale in [16, 448]. n: entries.
__global__ void fill_scales_kernel(uint8_t* p, int64_t n, DType fmt, float amax, uint64_t seed) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float u = 0.5f + 0.5f * static_cast<float>(hash32(seed, static_cast<uint64_t>(i)) >> 8) / 16777216.0f;
  switch (fmt) {
    case DType::kQ4: {
      const float scale = cuda::rbf(u * amax / 7.5f);
      const bf16 s = __float2bfloat16_rn(scale), m = __float2bfloat16_rn(-7.5f * scale);
      reinterpret_cast<bf16*>(p)[2 * i] = s;
      reinterpret_cast<bf16*>(p)[2 * i + 1] = m;
      break;
    }
    case DType::kFp8: reinterpret_cast<float*>(p)[i] = u * amax / 448.0f; break;
    case DType::kQ8: reinterpret_cast<float*>(p)[i] = u * amax / 127.0f; break;
    case DType::kNvFp4: p[i] = static_cast<uint8_t>(0x58 + (hash32(seed, static_cast<uint64_t>(i)) % 39)); break;
    default: break;
  }
}

__global__ void fill_f32_kernel(float* p, int64_t n, float v) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) p[i] = v;
}

}  // namespace

Status fill_packed_cuda(void* base, DType fmt, const Shape& shape, uint64_t seed, float amax, cudaStream_t s) {
  if (!dtype_is_packed(fmt) || fmt == DType::kQ6)
    return Status::error("fill_packed_cuda: no synthetic fill for " + std::string(dtype_name(fmt)));
  if (const char* why = packed_shape_error(fmt, shape)) return Status::error(std::string("fill_packed_cuda: ") + why);
  const PackedLayout L = packed_layout(fmt, shape);
  auto* b = static_cast<uint8_t*>(base);
  const int64_t codes = L.bytes[0];
  cuda::launch(fill_codes_kernel, cuda::blocks_for(codes, 256), 256, 0, s, b + L.offset[0], codes, fmt, seed);
  const int scale_plane = 1;
  const int64_t entry = fmt == DType::kNvFp4 ? 1 : 4;
  const int64_t n_scales = L.bytes[scale_plane] / entry;
  cuda::launch(fill_scales_kernel, cuda::blocks_for(n_scales, 256), 256, 0, s, b + L.offset[scale_plane], n_scales, fmt, amax,
                                                                    seed + 1);
  if (fmt == DType::kNvFp4)  // the global scale maps the largest block scale (448) times 6 to amax
    cuda::launch(fill_f32_kernel, cuda::blocks_for(L.matrices, 256), 256, 0, s, reinterpret_cast<float*>(b + L.offset[2]),
                                                                     L.matrices, amax / (6.0f * 448.0f));
  return cuda_status(cudaGetLastError(), "fill_packed_cuda");
}

}  // namespace dg
