// The CPU reference of top-k sparse attention (src/ops/attention/attention_topk.h): a rule that keeps every visible
// key is dense attention bit for bit; one kept key returns exactly the value row of the top-scoring key, and equal
// scores go to the lower position; a query whose attention one planted key dominates matches dense closely while a
// spread one does not; the kept set depends on the row's own visible keys only (the same bits whether a prefill
// runs in one call or in chunks), and a run repeats bit for bit; the k rule and its names.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"
#include "ops/attention/attention_topk.h"
#include "support/compare.h"
#include "support/seeded.h"

namespace dg {
namespace attention_topk_test {

using test::compare;
using test::seeded_uniform;

// Q [rows, heads, D]; cached keys/values at positions 0..n_cached; fresh rows (the queries' own keys) after them.
struct Inputs {
  AttnShape sh;
  int64_t rows = 0, n_cached = 0;
  std::vector<float> q, ck, cv, kf, vf;

  Inputs(AttnShape s, int64_t r, int64_t cached, uint64_t seed) : sh(s), rows(r), n_cached(cached) {
    const auto row = static_cast<size_t>(sh.n_kv_heads * sh.head_dim);
    q = seeded_uniform(static_cast<size_t>(rows * sh.n_heads * sh.head_dim), seed, -1.0f, 1.0f);
    ck = seeded_uniform(static_cast<size_t>(n_cached) * row, seed + 1, -1.0f, 1.0f);
    cv = seeded_uniform(static_cast<size_t>(n_cached) * row, seed + 2, -1.0f, 1.0f);
    kf = seeded_uniform(static_cast<size_t>(rows) * row, seed + 3, -1.0f, 1.0f);
    vf = seeded_uniform(static_cast<size_t>(rows) * row, seed + 4, -1.0f, 1.0f);
  }
  AttnKeys cached() const { return {ck.data(), cv.data(), 0, n_cached}; }
  AttnKeys fresh() const { return {kf.data(), vf.data(), n_cached, rows}; }
  std::vector<float> dense(bool causal, int64_t window, Storage act = Storage::kF32) const {
    std::vector<float> out(static_cast<size_t>(rows * sh.n_heads * sh.head_dim));
    attention_cpu(q.data(), rows, n_cached, cached(), fresh(), sh, causal, window, act, out.data());
    return out;
  }
  std::vector<float> topk(const AttnTopk& t, bool causal, int64_t window, Storage act = Storage::kF32) const {
    std::vector<float> out(static_cast<size_t>(rows * sh.n_heads * sh.head_dim));
    attention_topk_cpu(q.data(), rows, n_cached, cached(), fresh(), sh, causal, window, t, act, out.data());
    return out;
  }
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

AttnTopk fixed(int64_t k) { return {AttnTopk::Mode::kFixed, k}; }
constexpr AttnTopk kDyn{AttnTopk::Mode::kDyn, 0};

TEST(AttentionTopk, KeepingEveryVisibleKeyIsDenseBitForBit) {
  struct Case {
    AttnShape sh;
    int64_t rows, n_cached;
    bool causal;
    int64_t window;
  };
  // At most 64 keys in all, so dyn (at least 64 kept) keeps every one.
  const Case cases[] = {{{4, 2, 32}, 20, 37, false, 0}, {{4, 1, 16}, 25, 30, true, 0}, {{2, 2, 8}, 40, 7, true, 5}};
  for (const Case& c : cases) {
    const Inputs in(c.sh, c.rows, c.n_cached, 100 + static_cast<uint64_t>(c.rows));
    for (const Storage act : {Storage::kF32, Storage::kBF16}) {
      SCOPED_TRACE(testing::Message() << "rows " << c.rows << " causal " << c.causal << " act " << storage_name(act));
      const std::vector<float> dense = in.dense(c.causal, c.window, act);
      for (const AttnTopk& t : {fixed(c.rows + c.n_cached), fixed(kAttnTopkMax), kDyn, AttnTopk{}})
        EXPECT_TRUE(same_bits(in.topk(t, c.causal, c.window, act), dense)) << attn_topk_name(t);
      // The comparison can fail: one key per row is not dense attention.
      EXPECT_FALSE(same_bits(in.topk(fixed(1), c.causal, c.window, act), dense));
    }
  }
}

TEST(AttentionTopk, OneKeptKeyIsTheTopKeysValueAndTiesGoToTheLowerPosition) {
  // One head, D 8, 30 cached keys; key 17 is the query itself scaled up (the top score by far), and key 23 is a
  // copy of it with a different value row (an exact tie).
  const AttnShape sh{1, 1, 8};
  Inputs in(sh, 1, 30, 7);
  for (int64_t d = 0; d < 8; ++d) {
    in.ck[static_cast<size_t>(17 * 8 + d)] = 3.0f * in.q[static_cast<size_t>(d)];
    in.ck[static_cast<size_t>(23 * 8 + d)] = 3.0f * in.q[static_cast<size_t>(d)];
    in.cv[static_cast<size_t>(23 * 8 + d)] = 5.0f + static_cast<float>(d);
  }
  const std::vector<float> want17(in.cv.begin() + 17 * 8, in.cv.begin() + 18 * 8);
  EXPECT_EQ(in.topk(fixed(1), false, 0), want17) << "equal scores: the lower position (17) wins over 23";
  // Two kept keys: both copies, each with probability 1/2.
  const std::vector<float> two = in.topk(fixed(2), false, 0);
  for (int64_t d = 0; d < 8; ++d)
    EXPECT_FLOAT_EQ(two[static_cast<size_t>(d)],
                    0.5f * (want17[static_cast<size_t>(d)] + 5.0f + static_cast<float>(d)));
}

TEST(AttentionTopk, APlantedDominantKeyMatchesDenseAndASpreadQueryDoesNot) {
  // Eight queries over 400 cached keys (values of order 0.3 against |q|^2 ~ 21): query r's key sits at position
  // 40 r + 3 and equals the query, so its score exceeds every other by ~20 and the dropped mass is ~400 e^-20.
  const AttnShape sh{1, 1, 64};
  Inputs in(sh, 8, 400, 21);
  for (float& x : in.ck) x *= 0.3f;
  for (float& x : in.kf) x *= 0.3f;
  for (int64_t r = 0; r < 8; ++r)
    for (int64_t d = 0; d < 64; ++d)
      in.ck[static_cast<size_t>((40 * r + 3) * 64 + d)] = in.q[static_cast<size_t>(r * 64 + d)];
  const std::vector<float> dense = in.dense(false, 0);
  for (const AttnTopk& t : {fixed(4), kDyn}) {
    const test::Diff d = compare(in.topk(t, false, 0), dense);
    EXPECT_TRUE(d.finite);
    EXPECT_LT(d.max_abs, 1e-5) << attn_topk_name(t) << ": " << d.str();
  }
  // Without the planted keys the attention spreads over many keys, and four of them are not enough.
  const Inputs spread(sh, 8, 400, 21);
  const test::Diff d = compare(spread.topk(fixed(4), false, 0), spread.dense(false, 0));
  EXPECT_GT(d.max_abs, 1e-2) << d.str();
}

TEST(AttentionTopk, ARowsKeptSetDependsOnItsVisibleKeysOnlyAndRepeats) {
  // dyn over a causal prefill past 8,192 keys (k grows from 64 to 66 across the rows): the rows computed in one
  // call and in two chunks (the first chunk's keys then cached) give the same bits.
  const AttnShape sh{1, 1, 8};
  const int64_t n_cached = 8300, rows = 160, half = 80;
  const Inputs in(sh, rows, n_cached, 5);
  const std::vector<float> once = in.topk(kDyn, true, 0);
  EXPECT_TRUE(same_bits(once, in.topk(kDyn, true, 0))) << "a second run gives the same bits";

  const int64_t row = sh.n_kv_heads * sh.head_dim, out_row = sh.n_heads * sh.head_dim;
  std::vector<float> chunked(once.size());
  attention_topk_cpu(in.q.data(), half, n_cached, in.cached(), {in.kf.data(), in.vf.data(), n_cached, half}, sh, true,
                     0, kDyn, Storage::kF32, chunked.data());
  std::vector<float> k2(in.ck), v2(in.cv);  // the first chunk's keys appended to the cache
  k2.insert(k2.end(), in.kf.begin(), in.kf.begin() + half * row);
  v2.insert(v2.end(), in.vf.begin(), in.vf.begin() + half * row);
  attention_topk_cpu(in.q.data() + half * out_row, rows - half, n_cached + half,
                     {k2.data(), v2.data(), 0, n_cached + half},
                     {in.kf.data() + half * row, in.vf.data() + half * row, n_cached + half, rows - half}, sh, true, 0,
                     kDyn, Storage::kF32, chunked.data() + half * out_row);
  EXPECT_TRUE(same_bits(once, chunked));
  EXPECT_FALSE(same_bits(once, in.dense(true, 0))) << "dyn drops keys at this length";
}

TEST(AttentionTopk, TheKRule) {
  EXPECT_EQ(kDyn.keep(10), 10);
  EXPECT_EQ(kDyn.keep(100), 64);
  EXPECT_EQ(kDyn.keep(8191), 64);
  EXPECT_EQ(kDyn.keep(8320), 65);
  EXPECT_EQ(kDyn.keep(65536), 512);
  EXPECT_EQ(kDyn.keep(262144), 512);
  EXPECT_EQ(fixed(32).keep(10), 10);
  EXPECT_EQ(fixed(32).keep(1000), 32);
  EXPECT_EQ(AttnTopk{}.keep(1000), 1000);
  EXPECT_FALSE(AttnTopk{}.on());
  // The order key ranks like the floats, with -0 and +0 equal.
  const float ladder[] = {-std::numeric_limits<float>::infinity(), -3e38f, -2.5f, -1e-40f, 0.0f, 1e-40f, 1.0f, 3e38f,
                          std::numeric_limits<float>::infinity()};
  for (size_t i = 0; i + 1 < std::size(ladder); ++i)
    EXPECT_LT(attn_topk_order_key(ladder[i]), attn_topk_order_key(ladder[i + 1])) << ladder[i];
  EXPECT_EQ(attn_topk_order_key(-0.0f), attn_topk_order_key(0.0f));
  // Names.
  for (const char* name : {"off", "dyn", "1", "64", "4096"})
    EXPECT_EQ(attn_topk_name(attn_topk_from_name(name, "--attention-topk")), name);
  for (const char* bad : {"0", "-1", "4097", "64k", "", "dense", " 8"}) {
    try {
      attn_topk_from_name(bad, "--attention-topk");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("--attention-topk '") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace attention_topk_test
}  // namespace dg
