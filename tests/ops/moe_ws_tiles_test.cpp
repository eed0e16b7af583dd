// The tile walk of the warp-specialised expert kernels (src/ops/moe/moe_ws_tiles.h), on the CPU: every routed row
// of every expert falls in exactly one pass of every column tile, passes of at most the kernel's pass rows (128 for
// W8A8 and bf16, 64 for q4) and as even as the rows allow (no two of an expert more than one row apart), and
// neighbouring tiles are the passes of one weight slice.
#include "ops/moe/moe_ws_tiles.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "diffusion/rng.h"

namespace dg {
namespace {

void check_ws_walk(const std::vector<int32_t>& counts, int col_tiles, int pass = kWsPassRows) {
  const int E = static_cast<int>(counts.size());
  std::vector<int32_t> offsets(static_cast<size_t>(E + 1)), tile0(static_cast<size_t>(E + 1));
  for (int e = 0; e < E; ++e) {
    offsets[e + 1] = offsets[e] + counts[e];
    tile0[e + 1] = tile0[e] + ws_expert_tiles(counts[e], col_tiles, pass);
  }
  std::map<std::tuple<int, int>, std::vector<int>> covered;  // (expert, column tile) -> rows seen
  WsTile prev{-1, 0, 0, -1};
  for (int t = 0; t < tile0[E]; ++t) {
    const WsTile w = ws_tile_at(t, tile0.data(), offsets.data(), E, pass);
    ASSERT_GE(w.e, 0);
    ASSERT_LT(w.e, E);
    ASSERT_GE(w.m, 1);
    ASSERT_LE(w.m, pass);
    ASSERT_GE(w.r0, offsets[w.e]);
    ASSERT_LE(w.r0 + w.m, offsets[w.e + 1]) << "tile " << t;
    ASSERT_GE(w.ct, 0);
    ASSERT_LT(w.ct, col_tiles);
    auto& rows = covered[{w.e, w.ct}];
    for (int i = 0; i < w.m; ++i) rows.push_back(w.r0 + i);
    // passes fastest: a tile after the first of its slice continues the slice's passes, as even as they can be
    if (prev.e == w.e && prev.ct == w.ct) {
      EXPECT_EQ(w.r0, prev.r0 + prev.m) << "tile " << t;
      EXPECT_GE(prev.m - w.m, 0) << "tile " << t;
      EXPECT_LE(prev.m - w.m, 1) << "tile " << t;
    }
    prev = w;
  }
  for (int e = 0; e < E; ++e)
    for (int ct = 0; ct < col_tiles; ++ct) {
      auto it = covered.find({e, ct});
      if (counts[e] == 0) {
        EXPECT_TRUE(it == covered.end()) << "expert " << e << " has no rows but got tiles";
        continue;
      }
      ASSERT_TRUE(it != covered.end()) << "expert " << e << " column tile " << ct << " never walked";
      std::vector<int> want(static_cast<size_t>(counts[e]));
      for (int i = 0; i < counts[e]; ++i) want[static_cast<size_t>(i)] = offsets[e] + i;
      EXPECT_EQ(it->second, want) << "expert " << e << " column tile " << ct;
    }
}

TEST(MoeWsTiles, EveryRowOnceInEveryColumnTile) {
  check_ws_walk({300, 0, 129, 128, 65, 64, 7, 1, 33}, 1);
  check_ws_walk({300, 0, 129, 128, 65, 64, 7, 1, 33}, 6);
  check_ws_walk({0, 0, 5, 0}, 3);
  check_ws_walk({0, 0, 0, 256}, 2);
  check_ws_walk({1}, 1);
  check_ws_walk({300, 0, 129, 128, 65, 64, 7, 1, 33}, 6, kWsQ4PassRows);
  check_ws_walk({0, 0, 0, 256}, 2, kWsQ4PassRows);
  check_ws_walk({4096, 4097, 5000, 16385, 20000}, 2, kWsQ4PassRows);  // many passes
  check_ws_walk({16384, 16385, 20000}, 1);
}

TEST(MoeWsTiles, RandomRoutingsAtTheFullShape) {
  Lcg rng(41);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<int32_t> counts(128);
    for (auto& c : counts) c = rng.uniform() < 0.1 ? 0 : rng.randint(1024);
    check_ws_walk(counts, trial % 2 == 0 ? 6 : 11, trial % 3 == 0 ? kWsQ4PassRows : kWsPassRows);
  }
}

}  // namespace
}  // namespace dg
