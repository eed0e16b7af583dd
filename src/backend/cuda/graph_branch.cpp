// The conditional branches of a stream capture (see graph_branch.h).
#include "backend/cuda/graph_branch.h"

#include "backend/cuda/host_check.h"
#include "core/error.h"

namespace dg {

using cuda_host::check;

namespace {

struct CaptureInfo {
  cudaGraph_t graph = nullptr;
  const cudaGraphNode_t* deps = nullptr;
  size_t n = 0;
};

CaptureInfo capture_info(cudaStream_t s) {
  cudaStreamCaptureStatus status{};
  CaptureInfo info;
  check(cudaStreamGetCaptureInfo(s, &status, nullptr, &info.graph, &info.deps, nullptr, &info.n),
        "cudaStreamGetCaptureInfo");
  DG_CHECK(status == cudaStreamCaptureStatusActive && info.graph != nullptr,
           "a graph branch needs a stream that is capturing");
  return info;
}

}  // namespace

cudaGraphConditionalHandle capture_condition(cudaStream_t s) {
  cudaGraphConditionalHandle h{};
  check(cudaGraphConditionalHandleCreate(&h, capture_info(s).graph, 0, cudaGraphCondAssignDefault),
        "cudaGraphConditionalHandleCreate");
  return h;
}

void capture_if(cudaStream_t s, cudaGraphConditionalHandle cond, cudaStream_t branch,
                const std::function<void()>& body) {
  const CaptureInfo info = capture_info(s);
  cudaGraphNodeParams p{};
  p.type = cudaGraphNodeTypeConditional;
  p.conditional.handle = cond;
  p.conditional.type = cudaGraphCondTypeIf;
  p.conditional.size = 1;
  cudaGraphNode_t node = nullptr;
  // Full dependencies on what came before (a programmatic edge may only join two kernels).
  check(cudaGraphAddNode(&node, info.graph, info.deps, nullptr, info.n, &p), "cudaGraphAddNode (conditional)");
  check(cudaStreamUpdateCaptureDependencies(s, &node, nullptr, 1, cudaStreamSetCaptureDependencies),
        "cudaStreamUpdateCaptureDependencies");
  check(cudaStreamBeginCaptureToGraph(branch, p.conditional.phGraph_out[0], nullptr, nullptr, 0,
                                      cudaStreamCaptureModeThreadLocal),
        "cudaStreamBeginCaptureToGraph (conditional body)");
  try {
    body();
  } catch (...) {
    cudaGraph_t g = nullptr;
    (void)cudaStreamEndCapture(branch, &g);
    (void)cudaGetLastError();
    throw;
  }
  cudaGraph_t g = nullptr;
  check(cudaStreamEndCapture(branch, &g), "cudaStreamEndCapture (conditional body)");
}

}  // namespace dg
