// The process-wide programmatic-dependent-launch switch of cuda::launch (pdl.h, launch.cuh).
#include <atomic>

#include "core/cuda/launch.cuh"

namespace dg::cuda {
namespace {

std::atomic<bool> g_pdl{false};

// Built with the same architectures as every other kernel of the library, so the code the device runs for it is
// the code it runs for them.
__global__ void pdl_probe() { pdl_enter(); }

// PDL is safe only where the kernels were compiled with their griddepcontrol waits: code from sm_90 PTX or later.
// A Hopper-or-later device that runs the sm_80 build (JIT from its PTX) has no waits in it, so the launches there
// stay plain — testing the device's compute capability alone would not show that.
bool device_takes_pdl() {
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
  if (major < 9) return false;
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, pdl_probe) != cudaSuccess) return false;
  return attr.ptxVersion >= 90;
}

}  // namespace

void set_pdl(bool on) { g_pdl.store(on && device_takes_pdl(), std::memory_order_relaxed); }

bool pdl_supported() { return device_takes_pdl(); }

bool pdl_active() { return g_pdl.load(std::memory_order_relaxed); }

}  // namespace dg::cuda
