// Kernel launches through one helper, so every kernel of the library can take programmatic dependent launch (PDL,
// compute capability 9.0 and later): with it on, a kernel's blocks are launched while the kernel before it in the
// stream is still finishing, and wait in pdl_enter() until that kernel has completed and its writes are visible.
// What it saves is the launch gap between the small kernels of a step (docs/CUDA.md, "Programmatic dependent
// launch"). The rule that makes it safe: every kernel launched through cuda::launch calls pdl_enter() (or
// pdl_wait() then pdl_trigger()) before it reads or writes memory an earlier kernel may touch, and on every path,
// early returns included — a kernel that skipped the wait could finish before its predecessor and let the next
// kernel run early. tests/lint checks that each kernel under src/ calls one of them and that src/ launches no
// kernel with <<<>>>.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "core/cuda/pdl.h"

namespace dg::cuda {

// Launches kernel<<<grid, block, smem, stream>>>(args...), in clusters of cluster_x CTAs along x when cluster_x > 0
// (thread block clusters, sm_90: co-scheduled CTAs that may read each other's shared memory; grid.x a multiple of
// it), with programmatic stream serialisation when pdl_active(). Errors surface through cudaGetLastError(), as a
// <<<>>> launch's do.
template <class... Params, class... Args>
void launch_in(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, unsigned cluster_x,
               Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (cluster_x > 0) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster_x;
    attr[n].val.clusterDim.y = 1;
    attr[n].val.clusterDim.z = 1;
    ++n;
  }
  if (pdl_active()) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.attrs = n > 0 ? attr : nullptr;
  cfg.numAttrs = n;
  (void)cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// The plain launch (no clusters).
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  launch_in(kernel, grid, block, smem, stream, 0u, std::forward<Args>(args)...);
}

// In clusters of cluster_x CTAs along x.
template <class... Params, class... Args>
void launch_cluster(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                    unsigned cluster_x, Args&&... args) {
  launch_in(kernel, grid, block, smem, stream, cluster_x, std::forward<Args>(args)...);
}

// Waits until the kernels this one depends on have completed and their writes are visible (a no-op when the kernel
// was launched without PDL, and before sm_90).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
// Lets the next kernel in the stream launch its blocks (they still wait for this kernel's completion in their own
// pdl_wait). Called after pdl_wait, so at most two kernels' blocks are resident for one dependency chain.
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
// A kernel's first statement: wait for the previous kernel, then let the next one launch.
__device__ __forceinline__ void pdl_enter() {
  pdl_wait();
  pdl_trigger();
}

}  // namespace dg::cuda
