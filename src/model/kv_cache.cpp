#include "model/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "ops/attention/attention.h"
#include "ops/attention/kv_digest.h"

namespace dg {

KvCache::KvCache(const ModelConfig& cfg, const KvOptions& opt) : opt_(opt), window_(cfg.window) {
  DG_CHECK(opt.ring_slack >= 0, "kv ring slack must be >= 0");
  for (const LayerSpec& s : cfg.layers) {
    Layer L;
    L.sliding = s.sliding;
    L.n_kv = s.n_kv_heads;
    L.head_dim = s.head_dim;
    L.cap = 0;
    if (opt.device_alloc) {
      DG_CHECK(L.sliding || opt.initial_capacity > 0, "a device KV cache needs its context size up front");
      L.cap = L.sliding ? std::max<int64_t>(1, cfg.window - 1 + opt.ring_slack) : opt.initial_capacity;
      L.k = opt.device_alloc(Shape{L.cap, L.n_kv, L.head_dim});
      L.v = opt.device_alloc(Shape{L.cap, L.n_kv, L.head_dim});
    } else if (L.sliding) {
      const int64_t cap = std::max<int64_t>(1, cfg.window - 1 + opt.ring_slack);
      L.cap = cap;
      L.k = host_tensor(DType::kF32, Shape{cap, L.n_kv, L.head_dim});
      L.v = host_tensor(DType::kF32, Shape{cap, L.n_kv, L.head_dim});
    } else if (opt.initial_capacity > 0) {
      ensure_capacity(L, opt.initial_capacity);
    }
    layers_.push_back(std::move(L));
  }
}

void KvCache::ensure_capacity(Layer& L, int64_t positions) {
  if (positions <= L.cap) return;
  const int64_t cap = std::max<int64_t>({positions, L.cap * 2, 64});
  Tensor k = host_tensor(DType::kF32, Shape{cap, L.n_kv, L.head_dim});
  Tensor v = host_tensor(DType::kF32, Shape{cap, L.n_kv, L.head_dim});
  if (L.cap > 0) {
    std::memcpy(k.data, L.k.data, L.k.nbytes());
    std::memcpy(v.data, L.v.data, L.v.nbytes());
  }
  L.k = std::move(k);
  L.v = std::move(v);
  L.cap = cap;
}

int64_t KvCache::oldest(int l) const {
  const Layer& L = layers_[static_cast<size_t>(l)];
  return L.sliding ? std::max<int64_t>(0, len_ - L.cap) : 0;
}

KvLayer KvCache::layer(int l) const {
  const Layer& L = layers_[static_cast<size_t>(l)];
  return KvLayer{L.k, L.v, L.cap, L.sliding, opt_.storage};
}

KvLayer KvCache::prepare_write(int l, int64_t pos0, int64_t n) {
  Layer& L = layers_[static_cast<size_t>(l)];
  DG_CHECK(pos0 == len_, "kv write at position {} but the cache holds {} tokens", pos0, len_);
  if (on_host()) {
    if (!L.sliding) ensure_capacity(L, pos0 + n);
  } else {
    DG_CHECK(L.sliding || pos0 + n <= L.cap,
             "the context ({} tokens) exceeds the KV cache capacity of {} tokens: start with a larger --ctx",
             pos0 + n, L.cap);
  }
  return layer(l);
}

void KvCache::write(int l, int64_t pos0, int64_t n, const float* k, const float* v) {
  DG_CHECK(on_host(), "KvCache::write is the host path; a device backend writes through Backend::kv_write");
  KvLayer L = prepare_write(l, pos0, n);
  kv_write_cpu(k, v, n, L.k.shape[1] * L.k.shape[2], pos0, L.k.f32(), L.v.f32(), L.cap, L.ring, L.storage);
}

void KvCache::read(int l, int64_t pos0, int64_t n, float* k, float* v) const {
  DG_CHECK(on_host(), "KvCache::read is the host path");
  const Layer& L = layers_[static_cast<size_t>(l)];
  DG_CHECK(pos0 >= oldest(l) && pos0 + n <= len_, "kv read of positions [{}, {}) outside the live range [{}, {}) of layer {}",
           pos0, pos0 + n, oldest(l), len_, l);
  kv_read_cpu(L.k.f32(), L.v.f32(), L.n_kv * L.head_dim, L.cap, L.sliding, pos0, n, k, v);
}

bool KvCache::can_rewind(int64_t new_len) const {
  if (new_len < 0 || new_len > len_) return false;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    if (!L.sliding) continue;
    const int64_t need_from = std::max<int64_t>(0, new_len - (window_ - 1));
    if (need_from < oldest(static_cast<int>(l))) return false;
  }
  return true;
}

void KvCache::rewind(int64_t new_len) {
  DG_CHECK(can_rewind(new_len),
           "cannot rewind the KV cache from {} to {} tokens: the sliding-window rings no longer hold the {} tokens "
           "before it (re-prefill instead)", len_, new_len, window_ - 1);
  len_ = new_len;
}

uint64_t KvCache::fingerprint() const {
  DG_CHECK(on_host() || opt_.device_digests, "this device KV cache cannot be digested for a fingerprint");
  uint64_t h = kFnvBasis;
  auto fold = [&h](uint64_t d) { h = (h ^ d) * kFnvPrime; };
  fold(static_cast<uint64_t>(len_));
  std::vector<uint64_t> dk, dv;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    const int64_t row_bytes = L.n_kv * L.head_dim * static_cast<int64_t>(dtype_size(L.k.dtype));
    const auto* kb = static_cast<const uint8_t*>(L.k.data);
    const auto* vb = static_cast<const uint8_t*>(L.v.data);
    if (!on_host()) {
      const auto rows = static_cast<size_t>(static_cast<int64_t>(L.k.nbytes()) / row_bytes);
      dk.resize(rows);
      dv.resize(rows);
      opt_.device_digests(L.k, row_bytes, dk.data());
      opt_.device_digests(L.v, row_bytes, dv.data());
    }
    const int64_t from = std::max<int64_t>(oldest(static_cast<int>(l)), L.sliding ? len_ - (window_ - 1) : 0);
    for (int64_t p = std::max<int64_t>(0, from); p < len_; ++p) {
      const int64_t s = slot(L, p);
      fold(on_host() ? row_digest(kb + s * row_bytes, row_bytes) : dk[static_cast<size_t>(s)]);
      fold(on_host() ? row_digest(vb + s * row_bytes, row_bytes) : dv[static_cast<size_t>(s)]);
    }
  }
  return h;
}

uint64_t KvCache::fingerprint_v1() const {
  DG_CHECK(on_host() || opt_.device_read, "this device KV cache cannot be read back for a fingerprint");
  uint64_t h = kFnvBasis;
  auto mix = [&h](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * kFnvPrime;
  };
  mix(&len_, sizeof len_);
  std::vector<uint8_t> hk, hv;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    const size_t row_bytes = static_cast<size_t>(L.n_kv * L.head_dim) * dtype_size(L.k.dtype);
    const uint8_t* kb = static_cast<const uint8_t*>(L.k.data);
    const uint8_t* vb = static_cast<const uint8_t*>(L.v.data);
    if (!on_host()) {
      hk.resize(L.k.nbytes());
      hv.resize(L.v.nbytes());
      opt_.device_read(L.k, hk.data());
      opt_.device_read(L.v, hv.data());
      kb = hk.data();
      vb = hv.data();
    }
    const int64_t from = std::max<int64_t>(oldest(static_cast<int>(l)), L.sliding ? len_ - (window_ - 1) : 0);
    for (int64_t p = std::max<int64_t>(0, from); p < len_; ++p) {
      mix(kb + static_cast<size_t>(slot(L, p)) * row_bytes, row_bytes);
      mix(vb + static_cast<size_t>(slot(L, p)) * row_bytes, row_bytes);
    }
  }
  return h;
}

size_t KvCache::bytes_per_token() const {
  const size_t esz = opt_.storage == Storage::kF32 ? 4 : 2;
  size_t b = 0;
  for (const Layer& L : layers_)
    if (!L.sliding) b += static_cast<size_t>(2 * L.n_kv * L.head_dim) * esz;
  return b;
}

}  // namespace dg
