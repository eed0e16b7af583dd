// fp8_to_tiled_layout_cuda: an fp8 expert stack's codes into stage tiles (fp8_tiles.h), through a scratch copy.
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "core/packed_layout.h"
#include "ops/moe/fp8_tiles.h"
#include "ops/moe/moe_cuda.h"

namespace dg {
namespace {

// One thread per 16 codes of a row (a stage's rows are multiples of 16 codes long, so each chunk stays whole).
__global__ void fp8_tile_kernel(const uint8_t* codes, int64_t K, int64_t n, uint8_t* tiled) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int64_t chunks = K / 16, r = i / chunks, k = 16 * (i % chunks);
  *reinterpret_cast<uint4*>(tiled + fp8_tiled_offset(r, k, K)) = *reinterpret_cast<const uint4*>(codes + r * K + k);
}

}  // namespace

Status fp8_to_tiled_layout_cuda(void* W, const Shape& s, cudaStream_t st) {
  if (const char* why = packed_shape_error(DType::kFp8, s))
    return Status::error(std::string("fp8_to_tiled_layout_cuda: ") + why);
  if (!fp8_tiled_ok(s))
    return Status::error("fp8_to_tiled_layout_cuda: " + std::to_string(s[s.rank - 2]) + " rows a matrix and K = " +
                         std::to_string(s[s.rank - 1]) + "; the tiled form needs multiples of 128 and 16");
  if ((reinterpret_cast<uintptr_t>(W) & 15) != 0)
    return Status::error("fp8_to_tiled_layout_cuda: W must be 16-byte aligned");
  const int64_t K = s[s.rank - 1], bytes = s.numel();
  auto* base = static_cast<uint8_t*>(W);
  // The scratch copy from cudaMalloc and freed after a synchronisation (this runs at upload), as for q4's tiles: the
  // stream-ordered pool would keep it reserved.
  uint8_t* tiled = nullptr;
  if (cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&tiled), static_cast<size_t>(bytes)); e != cudaSuccess)
    return cuda_status(e, "fp8_to_tiled_layout_cuda");
  const int64_t n = bytes / 16;
  cuda::launch(fp8_tile_kernel, cuda::blocks_for(n, 256), 256, 0, st, base, K, n, tiled);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaMemcpyAsync(base, tiled, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, st);
  if (e == cudaSuccess) e = cudaStreamSynchronize(st);
  const cudaError_t freed = cudaFree(tiled);
  return cuda_status(e != cudaSuccess ? e : freed, "fp8_to_tiled_layout_cuda");
}

}  // namespace dg
