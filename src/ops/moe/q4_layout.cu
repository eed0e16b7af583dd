// q4_to_kernel_layout_cuda: a q4 tensor's disk layout into the streaming kernel's layout, in place on the device
// (definition and host twin: src/ops/moe/q4_layout.h). Two passes: each matrix's largest scale (its power p), then
// each row's blocks of four groups rewritten by one thread. q4_to_tiled_layout_cuda: the kernel layout's words into
// stage tiles, through a scratch copy.
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/moe/moe_cuda.h"
#include "ops/moe/q4_layout.h"
#include "ops/moe/relayout.cuh"

namespace dg {
namespace {

// Block m: the largest scale of matrix m -> factors[m] = 2^p.
__global__ void q4_power_kernel(const uint8_t* scales, int64_t row_bytes, int64_t rows_per_matrix, int64_t groups,
                                float* factors) {
  cuda::pdl_enter();
  __shared__ unsigned top;
  if (threadIdx.x == 0) top = 0;
  __syncthreads();
  const int64_t m = blockIdx.x, n = rows_per_matrix * groups;
  unsigned mine = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t r = m * rows_per_matrix + i / groups, g = i % groups;
    const uint16_t sb = *reinterpret_cast<const uint16_t*>(scales + r * row_bytes + 4 * g);
    mine = max(mine, static_cast<unsigned>(sb & 0x7FFFu));
  }
  atomicMax(&top, mine);
  __syncthreads();
  if (threadIdx.x == 0) factors[m] = q4_pow2(q4_kernel_power(static_cast<uint16_t>(top)));
}

// One thread per block of four groups of a row (q4_kernel_code_offset): its code bytes and its scale words.
__global__ void q4_relayout_kernel(uint8_t* codes, int64_t code_row_bytes, uint8_t* scales, int64_t scale_row_bytes,
                                   int64_t rows_per_matrix, int64_t groups, int64_t n, const float* factors) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t blocks = (groups + 3) / 4;
  if (i >= n) return;
  const int64_t r = i / blocks, g0 = 4 * (i % blocks);
  const int n_g = static_cast<int>(groups - g0 < 4 ? groups - g0 : 4);
  uint8_t* row = codes + r * code_row_bytes;
  uint4 disk[4];
  for (int c = 0; c < n_g; ++c) disk[c] = *reinterpret_cast<const uint4*>(row + 16 * (g0 + c));
  for (int c = 0; c < n_g; ++c) {
    const uint8_t* b = reinterpret_cast<const uint8_t*>(&disk[c]);
    for (int t = 0; t < 4; ++t)
      *reinterpret_cast<uint32_t*>(row + q4_kernel_code_offset(g0 + c, t, groups)) = q4_kernel_word(b, t);
  }
  const uint32_t f = __float_as_uint(factors[r / rows_per_matrix]);
  const int p = static_cast<int>(f >> 23) - 127;
  for (int c = 0; c < n_g; ++c) {
    uint32_t* s = reinterpret_cast<uint32_t*>(scales + r * scale_row_bytes + 4 * (g0 + c));
    *s = q4_kernel_scale_word(*s, p);
  }
}

// One thread per (row, stage): the row's code bytes and scale words of the stage into their tile.
__global__ void q4_tile_kernel(const uint8_t* codes, int64_t code_row_bytes, const uint8_t* scales,
                               int64_t scale_row_bytes, int64_t groups, int64_t n, uint8_t* tiled) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t stages = (groups + 3) / 4;
  if (i >= n) return;
  const int64_t r = i / stages, st = i % stages;
  const int g = q4_stage_groups(st, groups), rr = static_cast<int>(r % kQ4TileRows);
  uint8_t* chunk = tiled + q4_tiled_chunk(r / kQ4TileRows, st, groups);
  const auto* src = reinterpret_cast<const uint4*>(codes + r * code_row_bytes + 64 * st);
  auto* dst = reinterpret_cast<uint4*>(chunk + q4_tile_codes_at(rr, g));
  for (int c = 0; c < g; ++c) dst[c] = src[c];
  const auto* ssrc = reinterpret_cast<const uint32_t*>(scales + r * scale_row_bytes + 16 * st);
  auto* sdst = reinterpret_cast<uint32_t*>(chunk + q4_tile_scales_at(rr, g));
  for (int c = 0; c < g; ++c) sdst[c] = ssrc[c];
}

}  // namespace

Status q4_to_tiled_layout_cuda(void* W, const Shape& s, cudaStream_t st) {
  if (const char* why = packed_shape_error(DType::kQ4, s))
    return Status::error(std::string("q4_to_tiled_layout_cuda: ") + why);
  if (!q4_tiled_ok(s))
    return Status::error("q4_to_tiled_layout_cuda: " + std::to_string(s[s.rank - 2]) +
                         " rows a matrix; the tiled form needs a multiple of 128");
  if ((reinterpret_cast<uintptr_t>(W) & 15) != 0) return Status::error("q4_to_tiled_layout_cuda: W must be 16-byte aligned");
  const PackedLayout L = packed_layout(DType::kQ4, s);
  const int64_t groups = L.cols / 32, bytes = 20 * groups * L.rows;
  auto* base = static_cast<uint8_t*>(W);
  const int64_t n = L.rows * ((groups + 3) / 4);
  return relayout_through_scratch(base, bytes, st, "q4_to_tiled_layout_cuda", [&](uint8_t* tiled) {
    cuda::launch(q4_tile_kernel, cuda::blocks_for(n, 256), 256, 0, st, base + L.offset[0], L.row_bytes[0],
                 base + L.offset[1], L.row_bytes[1], groups, n, tiled);
  });
}

Status q4_to_kernel_layout_cuda(void* W, const Shape& s, cudaStream_t st) {
  if (const char* why = packed_shape_error(DType::kQ4, s))
    return Status::error(std::string("q4_to_kernel_layout_cuda: ") + why);
  if ((reinterpret_cast<uintptr_t>(W) & 15) != 0) return Status::error("q4_to_kernel_layout_cuda: W must be 16-byte aligned");
  const PackedLayout L = packed_layout(DType::kQ4, s);
  auto* base = static_cast<uint8_t*>(W);
  auto* factors = reinterpret_cast<float*>(base + q4_kernel_factor_offset(s));
  const int64_t groups = L.cols / 32, per_matrix = L.rows / L.matrices;
  if (L.matrices > 0x7FFFFFFF) return Status::error("q4_to_kernel_layout_cuda: too many matrices");
  cuda::launch(q4_power_kernel, static_cast<unsigned>(L.matrices), 256, 0, st, base + L.offset[1], L.row_bytes[1], per_matrix,
                                                                     groups, factors);
  const int64_t n = L.rows * ((groups + 3) / 4);
  cuda::launch(q4_relayout_kernel, cuda::blocks_for(n, 256), 256, 0, st, base + L.offset[0], L.row_bytes[0], base + L.offset[1],
                                                               L.row_bytes[1], per_matrix, groups, n, factors);
  return cuda_status(cudaGetLastError(), "q4_to_kernel_layout_cuda");
}

}  // namespace dg
