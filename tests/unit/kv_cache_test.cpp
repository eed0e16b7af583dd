// KvCache: sliding rings (wrap, window edges, chunks longer than the ring), full layers growing, storage rounding,
// rewinds within the ring slack, and the fingerprint.
#include <gtest/gtest.h>

#include "core/error.h"
#include "model/kv_cache.h"

namespace dg {
namespace kv_cache_test {

ModelConfig two_layers(int window) {
  ModelConfig c;
  c.window = window;
  c.n_layers = 2;
  LayerSpec s;
  s.sliding = true;
  s.head_dim = 2;
  s.n_kv_heads = 1;
  LayerSpec f = s;
  f.sliding = false;
  c.layers = {s, f};
  return c;
}

// Writes positions [len, len+n) with k = pos + 0.25, v = -pos.
void append(KvCache& kv, int64_t n) {
  const int64_t p0 = kv.len();
  std::vector<float> k(static_cast<size_t>(2 * n)), v(k.size());
  for (int64_t i = 0; i < n; ++i)
    for (int d = 0; d < 2; ++d) {
      k[static_cast<size_t>(2 * i + d)] = static_cast<float>(p0 + i) + 0.25f;
      v[static_cast<size_t>(2 * i + d)] = -static_cast<float>(p0 + i);
    }
  for (int l = 0; l < 2; ++l) kv.write(l, p0, n, k.data(), v.data());
  kv.commit(n);
}

float key_at(const KvCache& kv, int l, int64_t pos) {
  float k[2], v[2];
  kv.read(l, pos, 1, k, v);
  return k[0];
}

TEST(KvCache, SlidingRingWrapsAndKeepsWindowPlusSlack) {
  KvOptions o;
  o.ring_slack = 2;
  KvCache kv(two_layers(4), o);  // ring: 3 + 2 = 5 slots
  for (int i = 0; i < 12; ++i) append(kv, 1);
  EXPECT_EQ(kv.len(), 12);
  EXPECT_EQ(kv.oldest(0), 7);
  EXPECT_EQ(kv.oldest(1), 0);
  for (int64_t p = 7; p < 12; ++p) EXPECT_EQ(key_at(kv, 0, p), static_cast<float>(p) + 0.25f);
  for (int64_t p = 0; p < 12; ++p) EXPECT_EQ(key_at(kv, 1, p), static_cast<float>(p) + 0.25f);
  EXPECT_THROW(key_at(kv, 0, 6), Error) << "position 6 was overwritten";
}

TEST(KvCache, ChunkLongerThanTheRingKeepsItsTail) {
  KvOptions o;
  o.ring_slack = 0;
  KvCache kv(two_layers(4), o);  // 3 slots
  append(kv, 10);
  EXPECT_EQ(kv.oldest(0), 7);
  for (int64_t p = 7; p < 10; ++p) EXPECT_EQ(key_at(kv, 0, p), static_cast<float>(p) + 0.25f);
}

TEST(KvCache, RewindWithinTheSlackRestoresTheFingerprint) {
  KvOptions o;
  o.ring_slack = 4;
  KvCache kv(two_layers(4), o);
  append(kv, 9);
  const uint64_t fp = kv.fingerprint();
  append(kv, 4);
  EXPECT_NE(kv.fingerprint(), fp);
  ASSERT_TRUE(kv.can_rewind(9));
  kv.rewind(9);
  EXPECT_EQ(kv.fingerprint(), fp) << "the fingerprint covers only live positions";
  append(kv, 4);
  kv.rewind(9);
  EXPECT_EQ(kv.fingerprint(), fp);
}

TEST(KvCache, RewindBeyondTheRingIsRefusedWithAMessage) {
  KvOptions o;
  o.ring_slack = 1;
  KvCache kv(two_layers(4), o);  // 4 slots
  append(kv, 10);
  EXPECT_TRUE(kv.can_rewind(9));
  EXPECT_FALSE(kv.can_rewind(8));
  EXPECT_FALSE(kv.can_rewind(11));
  try {
    kv.rewind(5);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("re-prefill"), std::string::npos) << e.what();
  }
  EXPECT_EQ(kv.len(), 10);
}

TEST(KvCache, WritesMustExtendTheCache) {
  KvCache kv(two_layers(4), {});
  append(kv, 3);
  const float x[2] = {0, 0};
  EXPECT_THROW(kv.write(0, 1, 1, x, x), Error);
}

TEST(KvCache, StorageRoundsOnWrite) {
  KvOptions o;
  o.storage = Storage::kF16;
  KvCache kv(two_layers(4), o);
  const float k[2] = {1.0f + 1.0f / 4096.0f, 70000.0f}, v[2] = {0.1f, -0.1f};
  kv.write(1, 0, 1, k, v);
  kv.commit(1);
  float rk[2], rv[2];
  kv.read(1, 0, 1, rk, rv);
  EXPECT_EQ(rk[0], 1.0f) << "f16 has 10 mantissa bits";
  EXPECT_TRUE(std::isinf(rk[1]));
  EXPECT_EQ(rv[0], round_f16(0.1f));
}

TEST(KvCache, FullLayersGrowWithoutLosingData) {
  KvCache kv(two_layers(4), {});
  for (int i = 0; i < 300; ++i) append(kv, 1);
  for (int64_t p = 0; p < 300; p += 37) EXPECT_EQ(key_at(kv, 1, p), static_cast<float>(p) + 0.25f);
  EXPECT_EQ(kv.bytes_per_token(), 2u * 2u * 4u);
}

}  // namespace kv_cache_test
}  // namespace dg
