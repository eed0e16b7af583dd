// The CUDA backend (cuda_backend.cpp): bf16 activations and weights (or a pack's planes), an f16 KV cache, f32
// logits; kernel choices in CudaKernels (cuda_kernels.h). Made through the registry (src/backend/registry.h).
#pragma once

#include <memory>

#include "backend/registry.h"

namespace dg {

// Throws dg::Error when no GPU is visible or the device index does not exist (naming --backend cpu).
std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& o);
// Whether a CUDA device is visible.
bool cuda_present();

}  // namespace dg
