// Which packed weights the CUDA backend runs: a .dgq pack's tensors go through the streaming kernel
// (src/ops/moe/moe_stream.cu) — the experts' grouped GEMMs and, for linears (the self-conditioning MLP's q8, or an
// overridden class), its dense form. A weight in a format it has no body for (q6), with an input dimension it cannot
// tile, or packed experts with a MoE kernel other than `stream`, stop the upload before any weight is allocated,
// with a message naming the layer, the tensor, the format and what to run instead.
#pragma once

#include <string>

#include "backend/backend.h"
#include "backend/cuda/cuda_kernels.h"

namespace dg {

// Throws dg::Error naming `what` (e.g. "layer 3 experts.gate_up") when the CUDA backend cannot run `t` as `use`.
void cuda_check_weight(const Tensor& t, WeightUse use, const std::string& what, const CudaKernels& kernels);

}  // namespace dg
