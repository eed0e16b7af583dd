// The decide op behind the Decider interface on the CUDA backend: row statistics, uniforms, categorical draws and
// decisions are stream-ordered kernels; a step's one host read is the DecideStatus (pinned, then a stream sync).
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <memory>

#include "backend/backend.h"
#include "ops/row_stats/row_stats_cuda.h"

namespace dg {

// alloc: device tensors of the backend (stream-ordered, freed with it); form: the statistics' summation
// (CudaKernels::row_stats_groups).
std::unique_ptr<Decider> make_cuda_decider(cudaStream_t stream, std::function<Tensor(DType, Shape)> alloc,
                                           RowStatsForm form = RowStatsForm::kEach);

}  // namespace dg
