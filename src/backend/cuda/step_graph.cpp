// The CUDA backend's step graph and stage marks (see step_graph.h).
#include "backend/cuda/step_graph.h"

#include <map>

#include "backend/cuda/host_check.h"

namespace dg {

using cuda_host::check;

StepGraph::~StepGraph() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The allocations a capture recorded (cudaMallocAsync inside it: memory nodes), address and size in node order.
std::vector<std::pair<void*, size_t>> graph_allocations(cudaGraph_t g) {
  size_t n = 0;
  check(cudaGraphGetNodes(g, nullptr, &n), "cudaGraphGetNodes");
  std::vector<cudaGraphNode_t> nodes(n);
  check(cudaGraphGetNodes(g, nodes.data(), &n), "cudaGraphGetNodes");
  std::vector<std::pair<void*, size_t>> out;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    check(cudaGraphNodeGetType(node, &type), "cudaGraphNodeGetType");
    if (type != cudaGraphNodeTypeMemAlloc) continue;
    cudaMemAllocNodeParams p{};
    check(cudaGraphMemAllocNodeGetParams(node, &p), "cudaGraphMemAllocNodeGetParams");
    out.emplace_back(p.dptr, p.bytesize);
  }
  return out;
}

}  // namespace

void StepGraph::begin(cudaStream_t s) {
  begun_ = std::chrono::steady_clock::now();
  if (arena_ != nullptr) arena_->begin_capture();
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  capturing_ = true;
}

void StepGraph::end(cudaStream_t s) {
  capturing_ = false;
  ++stats_.captures;
  cudaGraph_t g = nullptr;
  if (arena_ != nullptr) arena_->end_capture();
  check(cudaStreamEndCapture(s, &g), "cudaStreamEndCapture");
  stats_.capture_s += seconds_since(begun_);
  const auto t0 = std::chrono::steady_clock::now();
  bool updated = false;
  // An in-place update keeps the instantiated graph's allocations: only a capture whose allocations have the same
  // addresses and sizes may take it (a smaller canvas's capture allocates elsewhere, and its kernels would read
  // memory the instantiated graph does not hold). With the arena the same holds for the blocks it placed: a capture
  // of other shapes places other sizes, and is instantiated (updated from a capture of another canvas size, with no
  // memory nodes on either side, replays gave wrong logits: CudaParity.ACaptureAfterAnotherSize...).
  std::vector<std::pair<void*, size_t>> allocations = graph_allocations(g);
  std::vector<std::pair<size_t, size_t>> blocks;
  if (arena_ != nullptr) blocks = arena_->captured();
  if (exec_ != nullptr && (allocations != allocations_ || blocks != arena_blocks_)) {
    check(cudaGraphExecDestroy(exec_), "cudaGraphExecDestroy");
    exec_ = nullptr;
  }
  allocations_ = std::move(allocations);
  arena_blocks_ = std::move(blocks);
  if (exec_ != nullptr) {
    cudaGraphExecUpdateResultInfo info{};
    updated = cudaGraphExecUpdate(exec_, g, &info) == cudaSuccess;
    if (!updated) {
      (void)cudaGetLastError();
      check(cudaGraphExecDestroy(exec_), "cudaGraphExecDestroy");
      exec_ = nullptr;
    }
  }
  if (!updated) check(cudaGraphInstantiate(&exec_, g, 0), "cudaGraphInstantiate");
  check(cudaGraphDestroy(g), "cudaGraphDestroy");
  if (arena_ != nullptr) arena_->free_retired();  // the graph that read them is replaced
  (updated ? stats_.updates : stats_.instantiations) += 1;
  (updated ? stats_.update_s : stats_.instantiate_s) += seconds_since(t0);
}

void StepGraph::launch(cudaStream_t s) {
  DG_CHECK(exec_ != nullptr, "launch_captured: nothing was captured");
  check(cudaGraphLaunch(exec_, s), "cudaGraphLaunch");
}

void StageMarks::set_profiling(bool on) {
  on_ = on;
  for (auto& m : marks_) cudaEventDestroy(m.second);
  marks_.clear();
}

void StageMarks::mark(const char* name, cudaStream_t s, bool capturing) {
  if (!on_ || capturing) return;
  cudaEvent_t e;
  check(cudaEventCreate(&e), "cudaEventCreate");
  check(cudaEventRecord(e, s), "cudaEventRecord");
  marks_.emplace_back(name, e);
}

std::vector<std::pair<std::string, double>> StageMarks::take(cudaStream_t s) {
  check(cudaStreamSynchronize(s), "synchronize");
  std::map<std::string, double> acc;
  for (size_t i = 0; i + 1 < marks_.size(); ++i) {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, marks_[i].second, marks_[i + 1].second), "cudaEventElapsedTime");
    acc[marks_[i].first] += ms;
  }
  for (auto& m : marks_) cudaEventDestroy(m.second);
  marks_.clear();
  return {acc.begin(), acc.end()};
}

}  // namespace dg
