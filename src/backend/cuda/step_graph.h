// The CUDA backend's replayable step: one stream capture instantiated as a graph, updated in place when a later
// capture has the same topology (the cache grew; the shapes did not) and the same memory nodes, re-instantiated
// otherwise; with a capture arena (core/cuda/capture_arena.h) the capture's buffers come from memory the arena
// holds, so a capture of the same step has no memory nodes to differ; and the per-stage event marks of a profiled
// step (bench's stage table). Host code.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>

#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/cuda/capture_arena.h"

namespace dg {

class StepGraph {
 public:
  StepGraph() = default;
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;
  ~StepGraph();

  void begin(cudaStream_t s);   // starts capturing the stream's work (thread-local mode)
  void end(cudaStream_t s);     // ends the capture; the graph replaces the previous one
  void launch(cudaStream_t s);  // replays the last captured graph; an error if none was captured
  void set_arena(cuda::CaptureArena* arena) { arena_ = arena; }  // null: buffers by cudaMallocAsync (memory nodes)
  bool capturing() const { return capturing_; }
  uint64_t captures() const { return stats_.captures; }  // captures ended so far
  const GraphStats& stats() const { return stats_; }

 private:
  bool capturing_ = false;
  GraphStats stats_;
  std::chrono::steady_clock::time_point begun_;
  cudaGraphExec_t exec_ = nullptr;
  cuda::CaptureArena* arena_ = nullptr;
  std::vector<std::pair<void*, size_t>> allocations_;  // the instantiated graph's memory nodes
  std::vector<std::pair<size_t, size_t>> arena_blocks_;  // and the blocks its capture placed in the arena
};

// Events recorded between the stages of a step while profiling is on (none inside a capture); take() sums the
// milliseconds between consecutive marks per stage name.
class StageMarks {
 public:
  void set_profiling(bool on);
  void mark(const char* name, cudaStream_t s, bool capturing);
  std::vector<std::pair<std::string, double>> take(cudaStream_t s);  // synchronises the stream

 private:
  bool on_ = false;
  std::vector<std::pair<std::string, cudaEvent_t>> marks_;
};

}  // namespace dg
