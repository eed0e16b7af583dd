#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/embed/embed_cuda.h"

namespace dg {
namespace {

__global__ void embed_kernel(const int32_t* ids, const cuda::bf16* table, int64_t hidden, float scale,
                             cuda::bf16* out) {
  cuda::pdl_enter();
  const int64_t r = blockIdx.x;
  const cuda::bf16* row = table + static_cast<int64_t>(ids[r]) * hidden;
  for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x)
    out[r * hidden + c] = __float2bfloat16_rn(__bfloat162float(row[c]) * scale);
}

}  // namespace

Status embed_cuda(const int32_t* ids, int64_t rows, const void* table, int64_t hidden, float scale, void* out,
                  cudaStream_t s) {
  if (rows == 0) return Status::ok();
  cuda::launch(embed_kernel, static_cast<unsigned>(rows), 256, 0, s, ids, static_cast<const cuda::bf16*>(table), hidden, scale,
                                                           static_cast<cuda::bf16*>(out));
  return cuda_status(cudaGetLastError(), "embed_cuda");
}

}  // namespace dg
