// RMSNorm over the last dimension: y = x * (mean(x^2) + eps)^(-1/2) [* w], computed in f32 whatever the storage.
// Gemma-4 style: the weight multiplies directly (x*w, not x*(1+w)); "no-scale" norms pass w = nullptr.
// Reference: DiffusionGemmaRMSNorm in modeling_diffusion_gemma.py.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace dg {

// x, y: [rows, dim] f32 (may alias). w: [dim] of a floating dtype, or nullptr.
void rmsnorm_cpu(const float* x, int64_t rows, int64_t dim, const Tensor* w, float eps, float* y);

}  // namespace dg
