#include "model/integrity.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "quant/packed_tensor.h"

namespace dg {
namespace {

struct NonFinite {
  int64_t at = -1;  // element index, -1: none
  float value = 0.0f;
};

// The first non-finite value of `w` (read as rows of its last dimension; packed formats decoded).
NonFinite first_non_finite(const Tensor& w) {
  const int64_t K = w.shape.rank > 0 ? w.shape[w.shape.rank - 1] : 1;
  const int64_t rows = K > 0 ? w.numel() / K : 0;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, K));
  NonFinite first;
  std::mutex mu;
  parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
    std::vector<float> x;
    for (int64_t r = r0; r < r1; r += grain) {
      const int64_t n = std::min(grain, r1 - r);
      x.resize(static_cast<size_t>(n * K));
      if (dtype_is_packed(w.dtype)) {
        weight_rows_f32(w, r, n, x.data());
      } else {
        convert_to_f32(static_cast<const uint8_t*>(w.data) + static_cast<size_t>(r * K) * dtype_size(w.dtype),
                       w.dtype, x.size(), x.data());
      }
      const auto bad = std::find_if(x.begin(), x.end(), [](float v) { return !std::isfinite(v); });
      if (bad == x.end()) continue;
      const std::lock_guard<std::mutex> lock(mu);
      const int64_t at = r * K + (bad - x.begin());
      if (first.at < 0 || at < first.at) first = NonFinite{at, *bad};
      return;  // later rows of this range cannot come first
    }
  });
  return first;
}

}  // namespace

int64_t check_weights_finite(const Checkpoint& ck) {
  int64_t values = 0;
  for (const WeightEntry& e : expected_weights(ck.config)) {
    if (!ck.store.has(e.name)) continue;  // optional tensors bind_weights accepted as absent
    const Tensor w = ck.store.view(e.name);
    const NonFinite bad = first_non_finite(w);
    if (bad.at >= 0) {
      const int64_t K = w.shape.rank > 0 ? w.shape[w.shape.rank - 1] : 1;
      fail("tensor '{}' in '{}' holds a non-finite value ({}) at element {} (row {}, column {}); the checkpoint is "
           "corrupt or was saved from a diverged model",
           e.name, ck.store.info(e.name).file, bad.value, bad.at, bad.at / K, bad.at % K);
    }
    values += w.numel();
  }
  return values;
}

uint64_t verify_pack_checksums(const Checkpoint& ck) {
  DG_CHECK(ck.pack.has_value(), "'{}' is not a .dgq pack: safetensors checkpoints store no checksums", ck.dir);
  const PackManifest& m = *ck.pack;
  if (m.version < kPackFirstChecksumVersion)
    fail("pack '{}' is format version {}, which stores no checksums; re-create it with `diffgemma quantize` to "
         "verify it",
         ck.dir, m.version);
  std::vector<uint64_t> got(m.tensors.size());
  parallel_for(static_cast<int64_t>(m.tensors.size()), 1, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) {
      const TensorInfo& t = ck.store.info(m.tensors[static_cast<size_t>(i)].name);
      got[static_cast<size_t>(i)] = pack_checksum(t.data, t.nbytes);
    }
  });
  uint64_t bytes = 0;
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const PackEntry& e = m.tensors[i];
    if (got[i] != e.xxh3)
      fail("tensor '{}' in '{}' (bytes [{}, {})): its XXH3-64 is {:016x}, but the manifest records {:016x}; the blob "
           "is corrupt (a damaged copy, download or disk): copy it again, or re-create it with `diffgemma quantize`",
           e.name, ck.store.info(e.name).file, e.offset, e.offset + e.bytes, got[i], e.xxh3.value_or(0));
    bytes += e.bytes;
  }
  return bytes;
}

}  // namespace dg
