// row_digest (kv_digest.h) for every row of a device buffer: a warp per row, lane l hashing the row's words l,
// l + 32, ..., then lane 0 hashing the 32 lane values in order.
#include <cstdint>
#include <string>

#include "core/cuda/cuda_check.h"
#include "core/cuda/launch.cuh"
#include "ops/attention/attention_cuda.h"
#include "ops/attention/kv_digest.h"

namespace dg {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) row_digest_kernel(const uint8_t* data, int64_t rows, int64_t row_bytes,
                                                              bool whole_words, uint64_t* out) {
  cuda::pdl_enter();
  const int64_t row = (blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x & 31);
  if (row >= rows) return;  // a whole warp: its lanes share the row
  const uint8_t* r = data + row * row_bytes;
  const int64_t words = (row_bytes + 7) / 8;
  uint64_t h = kFnvBasis;
  for (int64_t w = lane; w < words; w += kDigestLanes) {
    uint64_t x = 0;
    if (whole_words) {
      x = reinterpret_cast<const uint64_t*>(r)[w];
    } else {
      for (int64_t b = 0; b < 8 && 8 * w + b < row_bytes; ++b) x |= static_cast<uint64_t>(r[8 * w + b]) << (8 * b);
    }
    h = (h ^ x) * kFnvPrime;
  }
  uint64_t d = kFnvBasis;
  for (int l = 0; l < kDigestLanes; ++l) d = (d ^ __shfl_sync(0xffffffffu, h, l)) * kFnvPrime;
  if (lane == 0) out[row] = d;
}

}  // namespace

Status row_digests_cuda(const void* data, int64_t rows, int64_t row_bytes, uint64_t* out, cudaStream_t s) {
  if (rows == 0) return Status::ok();
  if (row_bytes <= 0) return Status::error("row_digests_cuda: rows of " + std::to_string(row_bytes) + " bytes");
  const bool whole_words = row_bytes % 8 == 0 && reinterpret_cast<uintptr_t>(data) % 8 == 0;
  const int64_t blocks = (rows * 32 + kThreads - 1) / kThreads;
  cuda::launch(row_digest_kernel, static_cast<unsigned>(blocks), kThreads, 0, s, static_cast<const uint8_t*>(data),
               rows, row_bytes, whole_words, out);
  return cuda_status(cudaGetLastError(), "row_digests_cuda");
}

}  // namespace dg
