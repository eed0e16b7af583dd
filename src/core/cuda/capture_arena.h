// Device memory for the buffers of a captured step graph at the same addresses capture after capture, so that a
// later capture of the same step updates the instantiated graph in place (cudaGraphExecUpdate, about 2 ms of host
// time) instead of instantiating it anew (about 9 ms): cudaMallocAsync inside a capture records memory nodes whose
// addresses move from capture to capture, and a graph is only updated where they are equal (step_graph.cpp).
//
// Blocks are placed by an OffsetArena (the same sequence of allocations and frees, the same offsets) in one region of
// device memory the arena owns. A block past the region's end is allocated by cudaMallocAsync as before (a memory
// node; that capture is instantiated), and the next capture's begin grows the region to the furthest offset placed
// so far and an eighth more, where no block lives in the old region (its addresses are in the graph until that graph is replaced).
// Frees follow the capture's order on the host, as cudaFreeAsync's on the capturing stream do: a freed block is only
// placed again for work captured after the free. Host code.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/offset_arena.h"

namespace dg::cuda {

class CaptureArena {
 public:
  CaptureArena() = default;
  CaptureArena(const CaptureArena&) = delete;
  CaptureArena& operator=(const CaptureArena&) = delete;
  ~CaptureArena();  // frees the regions (the work that used them must be done)

  // Before a capture begins (no capture in progress on this thread): grows the region where it can, then this
  // thread's stream_alloc places the buffers of capturing streams here until end_capture.
  void begin_capture();
  void end_capture();
  // After the graph of the capture replaced the one before it: frees the regions begin_capture left behind.
  void free_retired();

  cudaError_t alloc(void** p, size_t bytes, cudaStream_t s);
  // Whether p is a block of this arena (freed now; one past the region goes back by cudaFreeAsync on s).
  bool release(void* p, cudaStream_t s);

  // The blocks placed since begin_capture, (offset, bytes) in order: two captures of one step at the same shapes
  // place the same list; a capture of other shapes does not (StepGraph updates a graph only from an equal list).
  const std::vector<std::pair<size_t, size_t>>& captured() const { return captured_; }
  size_t region_bytes() const { return cap_; }
  size_t overflows() const { return overflows_; }  // blocks placed past the region's end, in all

 private:
  std::mutex m_;
  OffsetArena offsets_;
  char* base_ = nullptr;
  size_t cap_ = 0;
  size_t in_region_ = 0;  // blocks now living in the region
  size_t overflows_ = 0;
  struct Block {
    size_t offset;
    bool in_region;
  };
  std::unordered_map<void*, Block> blocks_;
  std::vector<void*> retired_;
  std::vector<std::pair<size_t, size_t>> captured_;
};

// Device memory for a kernel's caller: from this thread's capture arena when one is active and s is capturing,
// otherwise cudaMallocAsync on s; stream_free gives it back the same way. `from` (if set) receives the arena that
// placed the block, or null: a caller that frees later, outside the capture, gives it back to that arena's release.
cudaError_t stream_alloc(void** p, size_t bytes, cudaStream_t s, CaptureArena** from = nullptr);
void stream_free(void* p, cudaStream_t s);

}  // namespace dg::cuda
