// to_row_tiles_cuda: an fp8 or bf16 expert stack's rows into stage tiles (row_tiles.h), through a scratch copy.
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/moe/moe_cuda.h"
#include "ops/moe/relayout.cuh"
#include "ops/moe/row_tiles.h"

namespace dg {
namespace {

// One thread per 16 bytes of a row (a stage's rows are multiples of 16 bytes long, so each chunk stays whole).
__global__ void row_tile_kernel(const uint8_t* rows, int64_t row_bytes, int64_t n, uint8_t* tiled) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int64_t chunks = row_bytes / 16, r = i / chunks, at = 16 * (i % chunks);
  *reinterpret_cast<uint4*>(tiled + row_tiled_offset(r, at, row_bytes)) =
      *reinterpret_cast<const uint4*>(rows + r * row_bytes + at);
}

}  // namespace

Status to_row_tiles_cuda(void* W, DType dtype, const Shape& s, cudaStream_t st) {
  if (!row_tiles_ok(dtype, s))
    return Status::error("to_row_tiles_cuda: " + std::string(dtype_name(dtype)) + " weights of " +
                         (s.rank >= 2 ? std::to_string(s[s.rank - 2]) : std::string("no")) +
                         " rows a matrix; the tiled form needs fp8 or bf16, rows a multiple of 128 and of 16 bytes");
  if ((reinterpret_cast<uintptr_t>(W) & 15) != 0) return Status::error("to_row_tiles_cuda: W must be 16-byte aligned");
  const int64_t rb = tile_row_bytes(dtype, s), bytes = s.numel() / s[s.rank - 1] * rb;
  auto* base = static_cast<uint8_t*>(W);
  const int64_t n = bytes / 16;
  return relayout_through_scratch(base, bytes, st, "to_row_tiles_cuda", [&](uint8_t* tiled) {
    cuda::launch(row_tile_kernel, cuda::blocks_for(n, 256), 256, 0, st, base, rb, n, tiled);
  });
}

}  // namespace dg
