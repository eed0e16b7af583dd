// The CUDA launchers of logits.h. Only the .cu files, the CUDA backend and the CUDA tests include this header,
// so a source that includes logits.h for its CPU reference compiles the same with and without DG_WITH_CUDA (and a
// CUDA build takes it from the compiler cache).
#pragma once

#include "ops/logits/logits.h"

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include "core/status.h"

namespace dg {

// In place on the f32 lm_head product: l = cap * tanh(bf16(l) / cap) (cap <= 0: only the bf16 rounding).
Status softcap_cuda(float* logits, int64_t n, float cap, cudaStream_t s);

}  // namespace dg
#endif
