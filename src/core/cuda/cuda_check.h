// CUDA runtime helpers shared by kernels and launchers: error checks that become a Status or a dg::Error, and
// device discovery that answers 0 (not an error) on a machine without a GPU or driver.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "core/status.h"

namespace dg {

// Number of usable CUDA devices; 0 when there is no driver or no GPU.
int cuda_device_count();

inline Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::ok();
  return Status::error(std::string(what) + ": " + cudaGetErrorString(e));
}

}  // namespace dg
