// The CUDA launchers of embed.h. Only the .cu files, the CUDA backend and the CUDA tests include this header,
// so a source that includes embed.h for its CPU reference compiles the same with and without DG_WITH_CUDA (and a
// CUDA build takes it from the compiler cache).
#pragma once

#include "ops/embed/embed.h"

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include "core/status.h"

namespace dg {

// ids: device [rows] int32 (validated by the caller); table: device [vocab, hidden] bf16; out: bf16 [rows, hidden].
Status embed_cuda(const int32_t* ids, int64_t rows, const void* table, int64_t hidden, float scale, void* out,
                  cudaStream_t s);

}  // namespace dg
#endif
