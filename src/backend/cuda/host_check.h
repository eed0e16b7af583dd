// Host-side checks of the CUDA backend's launchers: a failed CUDA call, op Status or cuBLAS call becomes a
// dg::Error naming what failed (dg::OutOfMemory for an allocation the device could not serve).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/error.h"
#include "core/status.h"

namespace dg::cuda_host {

inline void check(cudaError_t e, const char* what) {
  if (e == cudaErrorMemoryAllocation) throw OutOfMemory(fmt::format("CUDA error in {}: {}", what, cudaGetErrorString(e)));
  if (e != cudaSuccess) fail("CUDA error in {}: {}", what, cudaGetErrorString(e));
}
inline void check(const Status& s) {
  if (!s.is_ok()) fail("{}", s.message());
}
inline void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) fail("cuBLAS error {} in {}", static_cast<int>(s), what);
}

}  // namespace dg::cuda_host
