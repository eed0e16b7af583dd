// KvCache: per-layer keys and values of every committed token. Full layers keep all positions; sliding layers keep
// a ring of window-1 + slack slots, so the canvas sees the last window-1 tokens and a rewind of up to `slack`
// tokens needs no re-prefill. Keys are stored post-k_norm post-RoPE, values post-v_norm (SPEC.md §2.4), rounded to
// the storage precision on write. Storage lives in Tensors so a device backend can own it.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/kv_layer.h"
#include "core/tensor.h"
#include "io/model_config.h"

namespace dg {

class KvCache {
 public:
  KvCache(const ModelConfig& cfg, const KvOptions& opt);

  int64_t len() const { return len_; }
  int n_layers() const { return static_cast<int>(layers_.size()); }
  Storage storage() const { return opt_.storage; }
  int64_t window() const { return window_; }

  // Oldest position whose K/V layer l still holds (0 for full layers).
  int64_t oldest(int l) const;
  // Writes K/V rows [n, n_kv, D] for positions [pos0, pos0+n) of layer l. Writes must extend the cache
  // contiguously: pos0 == len() for the first layer of a chunk; commit(n) then advances len().
  void write(int l, int64_t pos0, int64_t n, const float* k, const float* v);
  void commit(int64_t n) { len_ += n; }
  // Copies positions [pos0, pos0+n) of layer l, in position order, into k/v ([n, n_kv, D] each).
  void read(int l, int64_t pos0, int64_t n, float* k, float* v) const;

  // Truncates to `new_len` tokens. Possible when every sliding ring still holds the window before new_len.
  bool can_rewind(int64_t new_len) const;
  void rewind(int64_t new_len);  // throws dg::Error when !can_rewind
  void clear() { len_ = 0; }

  // A 64-bit hash of every live K/V row in position order: FNV-1a over the length and each row's digest
  // (row_digest, src/ops/attention/kv_digest.h; a device cache digests its rows on the device). Equal caches hash
  // equal; device caches hash their stored f16 bytes, so a fingerprint compares caches of one backend.
  uint64_t fingerprint() const;
  // The op-log's version-1 fingerprint (FNV-1a over the live bytes themselves, the whole cache copied to the host):
  // what `replay` checks a version-1 log against.
  uint64_t fingerprint_v1() const;

  // Layer l's storage as the backend's attention reads it.
  KvLayer layer(int l) const;
  // The same for a backend's kv_write of positions [pos0, pos0 + n): they must extend the cache (pos0 == len()); a
  // host full layer grows to hold them, a device one must already (device caches do not grow).
  KvLayer prepare_write(int l, int64_t pos0, int64_t n);
  bool on_host() const { return !opt_.device_alloc; }
  size_t bytes_per_token() const;  // at the storage precision, full layers plus the sliding rings amortised

 private:
  struct Layer {
    bool sliding = false;
    int64_t n_kv = 0, head_dim = 0, cap = 0;  // cap: ring slots (sliding) or allocated positions (full)
    Tensor k, v;                               // [cap, n_kv, head_dim] f32
  };
  int64_t slot(const Layer& L, int64_t pos) const { return L.sliding ? pos % L.cap : pos; }
  void ensure_capacity(Layer& L, int64_t positions);

  KvOptions opt_;
  int64_t window_ = 0;
  int64_t len_ = 0;
  std::vector<Layer> layers_;
};

}  // namespace dg
