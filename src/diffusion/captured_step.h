// A denoise step's forward replayed through the backend's graph (CUDA): captured again when what it bakes in
// changes (the cache, its length, the rows, the buffers it reads and writes) or when another caller's capture has
// replaced the backend's one graph since. The ModelDenoiser and the batched denoiser's single-sequence steps use it.
#pragma once

#include <cstdint>
#include <functional>

#include "backend/backend.h"
#include "model/kv_cache.h"

namespace dg {

struct StepGraphKey {
  const KvCache* kv = nullptr;
  const void* ids = nullptr;  // the canvas ids, refreshed outside the graph
  const void* sc = nullptr;   // the self-conditioning input (the previous step's tempered logits)
  const void* out = nullptr;  // the logits written
  int64_t len = -1, rows = 0;
  float cutoff = 0;
  bool operator==(const StepGraphKey&) const = default;
};

class CapturedStep {
 public:
  // Runs `forward` through the graph of `key`, capturing it first where needed. The backend must can_capture().
  void run(Backend& be, const StepGraphKey& key, const std::function<void()>& forward) {
    prepare(be, key, forward);
    be.launch_captured();
  }

  // Captures the graph of `key` where needed without launching it, so that a run() with the same key only launches.
  // A block's first step calls it for the next step while the GPU still works on the first (docs/CUDA.md, "Early
  // capture"): the capture's host time then overlaps the device's work instead of leaving the device idle.
  void prepare(Backend& be, const StepGraphKey& key, const std::function<void()>& forward) {
    if (key == key_ && be.captures() == capture_) return;
    be.capture_begin();
    forward();
    be.capture_end();
    key_ = key;
    capture_ = be.captures();
  }

 private:
  StepGraphKey key_;
  uint64_t capture_ = 0;
};

}  // namespace dg
