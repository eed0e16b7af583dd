// Synchronous copies between a device tensor (f32, bf16 or f16) and f32 host memory for the CUDA backend's
// copy_to_host / copy_from_host: half-precision tensors are converted on the host (round to nearest even).
#pragma once

#include <cuda_runtime.h>

#include "core/tensor.h"

namespace dg {

void device_to_host_f32(const Tensor& t, float* dst, cudaStream_t s);
void host_f32_to_device(const float* src, Tensor& t, cudaStream_t s);

}  // namespace dg
