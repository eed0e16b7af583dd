// The CUDA backend's MoE block: the router (norm, prep, the cuBLAS product), routing and the stable grouping by
// expert, the expert products in the kernel the options pick (the streaming kernel: W8A8, packed or bf16; cuBLAS's
// grouped GEMM outside graph captures for large calls; the wmma kernel for shapes the streaming kernel does not
// take), and the weighted combine. CPU twin: the CPU backend's moe() (moe_route_cpu, moe_experts_cpu).
#pragma once

#include <functional>

#include "backend/cuda/cublas_paths.h"
#include "backend/cuda/cuda_kernels.h"
#include "core/tensor.h"
#include "ops/moe/moe.h"
#include "ops/moe/moe_cuda.h"

namespace dg {

struct MoePathCtx {
  CublasCtx blas;  // the handle, the stream and its stream-ordered buffers
  const CudaKernels& kernels;
  float eps;        // the router norm's
  bool capturing;   // inside a graph capture: no host synchronisation (the cuBLAS path is off)
  Q4Layout q4;      // where q4 expert weights are in the kernel layout
  std::function<void(const char*)> stage;  // the backend's profiling mark ("moe_experts", "moe")
};

// out[T, H] = the MoE block of h (router input) and z (expert input), bf16 [T, H] each.
void moe_cuda_path(const MoePathCtx& c, const Tensor& h, const Tensor& z, const MoeWeights& w, int top_k,
                   Tensor& out);

}  // namespace dg
