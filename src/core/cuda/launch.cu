// The process-wide programmatic-dependent-launch switch of cuda::launch (pdl.h, launch.cuh).
#include <atomic>

#include "core/cuda/launch.cuh"

namespace dg::cuda {
namespace {

std::atomic<bool> g_pdl{false};

bool device_takes_pdl() {
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
  return major >= 9;
}

}  // namespace

void set_pdl(bool on) { g_pdl.store(on && device_takes_pdl(), std::memory_order_relaxed); }

bool pdl_active() { return g_pdl.load(std::memory_order_relaxed); }

}  // namespace dg::cuda
