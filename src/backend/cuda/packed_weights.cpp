// The CUDA backend's boundary for packed weights (declared in packed_weights.h).
#include "backend/cuda/packed_weights.h"

#include <string>

#include "core/error.h"
#include "ops/moe/moe_cuda.h"

namespace dg {

void cuda_check_weight(const Tensor& t, WeightUse use, const std::string& what, const CudaKernels& kernels) {
  if (use == WeightUse::kPlain || !dtype_is_packed(t.dtype)) return;
  const std::string fmt(dtype_name(t.dtype));
  if (!moe_stream_supports(t.dtype))
    fail("this .dgq pack stores {} as {}, and the CUDA backend has no {} kernel (it runs q4, fp8 and nvfp4 "
         "experts and q8 linears); quantize again with --profile q4|fp8|nvfp4 (or --set CLASS=FORMAT), or run "
         "this pack with --backend cpu",
         what, fmt, fmt);
  const int64_t K = t.shape[t.shape.rank - 1];
  const int64_t align = t.dtype == DType::kQ4 || t.dtype == DType::kNvFp4 ? 32 : 16;
  if (K % align != 0)
    fail("this .dgq pack stores {} as {} with input dimension {}, and the CUDA {} kernel needs a multiple of {}; "
         "quantize that class to another format or run with --backend cpu",
         what, fmt, K, fmt, align);
  if (use == WeightUse::kExperts && kernels.moe != MoeKernel::kStream && kernels.moe != MoeKernel::kAuto &&
      kernels.moe != MoeKernel::kWide && kernels.moe != MoeKernel::kWs)
    fail("the experts of this .dgq pack are {}: only the streaming MoE kernels read packed experts (not --moe "
         "{}); use --moe auto (the default), stream, wide or ws",
         fmt, kernel_name(kernels.moe));
}

}  // namespace dg
