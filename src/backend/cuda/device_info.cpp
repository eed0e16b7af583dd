// The CUDA backend's device reports (see device_info.h).
#include "backend/cuda/device_info.h"

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/host_check.h"

namespace dg {
namespace {

cudaMemPool_t default_pool() {
  cudaMemPool_t pool;
  int dev = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetDefaultMemPool(&pool, dev);
  return pool;
}

}  // namespace

std::string current_device_name() {
  cudaDeviceProp p{};
  int dev = 0;
  cudaGetDevice(&dev);
  cudaGetDeviceProperties(&p, dev);
  return p.name;
}

size_t pool_peak_bytes() {
  uint64_t high = 0, graph_high = 0;
  cudaMemPoolGetAttribute(default_pool(), cudaMemPoolAttrReservedMemHigh, &high);
  int dev = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetGraphMemAttribute(dev, cudaGraphMemAttrReservedMemHigh, &graph_high);
  return static_cast<size_t>(high + graph_high);
}

MemoryInfo device_memory_info() {
  size_t free = 0, total = 0;
  cuda_host::check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  const cudaMemPool_t pool = default_pool();
  uint64_t reserved = 0, used = 0;
  cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved);
  cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used);
  return MemoryInfo{free + static_cast<size_t>(reserved > used ? reserved - used : 0), total};
}

}  // namespace dg
