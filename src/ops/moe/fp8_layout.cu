// fp8_to_kernel_layout_cuda: an fp8 expert stack's disk layout into the streaming kernel's (rows padded to whole
// 128-byte lines; src/ops/moe/fp8_layout.h, which has the host twin), in place on the device through a copy.
#include "core/cuda/cuda_check.h"
#include "ops/moe/fp8_layout.h"
#include "ops/moe/moe_cuda.h"

namespace dg {

Status fp8_to_kernel_layout_cuda(void* W, const Shape& s, cudaStream_t st) {
  if (!fp8_kernel_layout_differs(s)) return Status::ok();
  const PackedLayout L = packed_layout(DType::kFp8, s);
  const int64_t rows = s[0] * s[1], K = s[2], pitch = fp8_kernel_pitch(K);
  auto* base = static_cast<uint8_t*>(W);
  void* disk = nullptr;
  cudaError_t e = cudaMallocAsync(&disk, static_cast<size_t>(L.total), st);
  if (e != cudaSuccess) return cuda_status(e, "fp8_to_kernel_layout_cuda");
  const auto* from = static_cast<const uint8_t*>(disk);
  e = cudaMemcpyAsync(disk, W, static_cast<size_t>(L.total), cudaMemcpyDeviceToDevice, st);
  if (e == cudaSuccess) e = cudaMemsetAsync(W, 0, static_cast<size_t>(fp8_kernel_scales_offset(s)), st);
  if (e == cudaSuccess)
    e = cudaMemcpy2DAsync(W, static_cast<size_t>(pitch), from + L.offset[0], static_cast<size_t>(K),
                          static_cast<size_t>(K), static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, st);
  if (e == cudaSuccess)
    e = cudaMemcpyAsync(base + fp8_kernel_scales_offset(s), from + L.offset[1], static_cast<size_t>(4 * rows),
                        cudaMemcpyDeviceToDevice, st);
  const cudaError_t f = cudaFreeAsync(disk, st);
  return cuda_status(e != cudaSuccess ? e : f, "fp8_to_kernel_layout_cuda");
}

}  // namespace dg
