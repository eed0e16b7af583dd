// The CUDA launchers of decide.h. Only the .cu files, the CUDA backend and the CUDA tests include this header,
// so a source that includes decide.h for its CPU reference compiles the same with and without DG_WITH_CUDA (and a
// CUDA build takes it from the compiler cache).
#pragma once

#include "ops/decide/decide.h"

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include "core/status.h"

namespace dg {

// The same three on device pointers (rows <= 1024); decide_cuda writes the status to device memory. The accept's
// f32 cumsum and the f64 entropy sum run in one thread, in the CPU's order, so every decision is bit-identical.
Status decide_start_cuda(const DecideParams& p, uint64_t lcg, const DecideBuffers& b, cudaStream_t s);
Status decide_uniforms_cuda(const DecideParams& p, const DecideBuffers& b, double* u, cudaStream_t s);
Status decide_cuda(const DecideParams& p, const DecideBuffers& b, const RowStats* stats, const int32_t* drawn,
                   int32_t* canvas, DecideStatus* status, cudaStream_t s);

}  // namespace dg
#endif
