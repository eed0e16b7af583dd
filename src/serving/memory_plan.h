// How many streams `serve` denoises together: what one stream holds (its session's KV cache, its self-conditioning
// state, its canvas's rows in the batched forward), what the server holds once (the lm_head chunk, one prefill
// pass), both computed from the model config and the backend's storage sizes, and the largest batch whose memory
// fits the backend's free memory less a margin. The formula and what it gives on an H200 and an H100:
// docs/SERVER.md, "Memory per stream".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "backend/registry.h"
#include "core/host_memory.h"
#include "io/model_config.h"

namespace dg {

inline constexpr int kMinSlots = 4;  // resident sessions when --slots is not given, however small the batch

// Bytes one stream holds.
struct StreamMemory {
  size_t kv = 0;           // its session's KV cache: full layers at the context, sliding rings of window-1+slack
  size_t tempered = 0;     // self-conditioning state: the last step's tempered logits [canvas, vocab]
  size_t activations = 0;  // its canvas's rows of a batched forward (the peak of one layer's live buffers)
  size_t canvas = 0;       // canvas ids, row statistics, uniforms and draws
  size_t working() const { return tempered + activations + canvas; }  // held while it is in flight
};

// Bytes the server holds once, whatever the batch.
struct SharedMemory {
  size_t logits = 0;   // f32 logits: the batched lm_head chunk, or the serial denoiser's one canvas
  size_t prefill = 0;  // one encoder pass over the largest prompt chunk
  size_t soft_embed = 0;  // one canvas's self-conditioning probabilities [canvas, vocab]
  size_t total() const { return logits + prefill + soft_embed; }
};

struct MemoryRequest {
  int64_t context = 0;       // tokens a session's cache holds (serve: --ctx + the canvas)
  int64_t ring_slack = 0;    // sliding-ring slots beyond window - 1
  int64_t prefill_rows = 0;  // rows of the largest encoder pass of prompt tokens
  int64_t logit_rows = 2048;  // the batched lm_head's chunk (ModelBatchDenoiser)
  StorageBytes bytes;
  int max_batch = 0;  // 0: the most that fits, at most `cap`; else checked
  int slots = 0;      // 0: as many as the batch, at least kMinSlots; else checked
  int cap = 64;
};

struct MemoryPlan {
  StreamMemory stream;
  SharedMemory shared;
  MemoryInfo memory;      // what the backend reported (or --memory gave)
  size_t margin = 0;      // kept free: max(1 GiB, 5% of the total)
  int max_batch = 1;      // streams denoised together (1: the serial worker)
  int slots = kMinSlots;  // sessions (KV caches) kept resident
  int fits = 0;           // the most streams that would fit, the cap aside
  std::string why;        // one line: the chosen batch and what bounded it
  // Bytes `batch` streams over `slots` sessions need, with this plan's shared buffers.
  size_t need(int batch, int slots) const;
};

// Activation bytes one row holds at the peak of a layer of the forward (the largest layer kind).
size_t activation_bytes_per_row(const ModelConfig& cfg, int act_bytes);
StreamMemory stream_memory(const ModelConfig& cfg, const MemoryRequest& r);
SharedMemory shared_memory(const ModelConfig& cfg, const MemoryRequest& r, bool batched);
// Chooses the batch and the slots; throws dg::Error naming the numbers when an explicit --max-batch or --slots (or
// a single stream) does not fit.
MemoryPlan plan_memory(const ModelConfig& cfg, const MemoryRequest& r, MemoryInfo memory);

std::string gib(size_t bytes);  // "12.3 GiB"

}  // namespace dg
