// A device tensor's bytes rearranged through a scratch copy, for the upload's layout conversions (q4's stage tiles,
// q4_layout.cu; the fp8 and bf16 experts' row tiles, row_tiles.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "core/status.h"

namespace dg {

// write(scratch) launches on `st` the kernel that writes the new order of the `bytes` bytes at base into scratch,
// which is then copied back over them. The scratch comes from cudaMalloc and is freed after a synchronisation (this
// runs at upload): from the stream-ordered pool it stayed reserved there, 0.43 GiB more device memory for the
// 26B-A4B's q4 experts. `what` names the conversion in errors.
template <class Write>
Status relayout_through_scratch(uint8_t* base, int64_t bytes, cudaStream_t st, const char* what, Write write) {
  uint8_t* scratch = nullptr;
  if (cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&scratch), static_cast<size_t>(bytes)); e != cudaSuccess)
    return cuda_status(e, what);
  write(scratch);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaMemcpyAsync(base, scratch, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, st);
  if (e == cudaSuccess) e = cudaStreamSynchronize(st);
  const cudaError_t freed = cudaFree(scratch);
  return cuda_status(e != cudaSuccess ? e : freed, what);
}

}  // namespace dg
