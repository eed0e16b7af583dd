// How a backend stores a KV cache (KvOptions, filled by Backend::configure_kv) and one layer of it as the attention
// and cache-write ops see it (KvLayer). The cache itself (positions, rings, rewinds) is the model's
// (src/model/kv_cache.h).
#pragma once

#include <cstdint>
#include <functional>

#include "core/tensor.h"

namespace dg {

struct KvOptions {
  Storage storage = Storage::kF32;
  int64_t ring_slack = 512;     // extra sliding-ring slots beyond window-1 (cheap rewinds)
  int64_t initial_capacity = 0;  // full-layer slots to reserve up front (host storage grows on demand)
  // Device storage: allocates a [slots, n_kv, head_dim] tensor. Unset: host f32 tensors (the CPU backend), which
  // the cache's host read/write/fingerprint methods use. Device caches never grow: initial_capacity is the context.
  std::function<Tensor(Shape)> device_alloc;
  // Device storage: copies a tensor's bytes to host memory (the version-1 fingerprint).
  std::function<void(const Tensor&, void*)> device_read;
  // Device storage: row_digest (src/ops/attention/kv_digest.h) of each row of `row_bytes` bytes of a tensor into
  // host memory (the fingerprint).
  std::function<void(const Tensor&, int64_t row_bytes, uint64_t* host)> device_digests;
};

// One layer's keys and values as stored; position p lives in slot p % cap on a ring (sliding layers), slot p
// otherwise. The tensors share the cache's storage, so writes through a KvLayer land in the cache.
struct KvLayer {
  Tensor k, v;  // [cap, n_kv, head_dim]: host f32 (values rounded through `storage`) or device memory
  int64_t cap = 0;
  bool ring = false;
  Storage storage = Storage::kF32;
};

}  // namespace dg
