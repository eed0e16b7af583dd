// The process-wide switch for programmatic dependent launch of the library's kernels (src/core/cuda/launch.cuh),
// in plain C++ for the host code that sets it.
#pragma once

namespace dg::cuda {

// set_pdl(true) takes effect on devices of compute capability 9.0 and later that run the kernels' sm_90-or-later
// code only (elsewhere launches stay plain).
// Process-wide: the CUDA backend sets it from CudaKernels::pdl when it is made. Off until then.
void set_pdl(bool on);
bool pdl_active();
// Whether set_pdl(true) would take effect on the current device (its compute capability and the code it runs).
bool pdl_supported();

}  // namespace dg::cuda
