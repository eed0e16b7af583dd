// OffsetArena (src/core/offset_arena.h): first fit, merged free neighbours, the same offsets for the same sequence.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "core/offset_arena.h"

namespace dg::test {
namespace {

TEST(OffsetArena, PlacesInOrderAndRoundsToTheAlignment) {
  OffsetArena a(256);
  EXPECT_EQ(a.place(100), 0u);
  EXPECT_EQ(a.place(256), 256u);
  EXPECT_EQ(a.place(0), 512u);  // an empty block still takes one unit
  EXPECT_EQ(a.place(257), 768u);
  EXPECT_EQ(a.high_water(), 1280u);
  EXPECT_EQ(a.live_bytes(), 1280u);
}

TEST(OffsetArena, ReusesTheFirstFreeRangeThatFitsAndMergesNeighbours) {
  OffsetArena a(256);
  const size_t b0 = a.place(256), b1 = a.place(512), b2 = a.place(256), b3 = a.place(256);
  EXPECT_EQ(a.release(b1), 512u);
  EXPECT_EQ(a.place(256), b1);        // first fit: the front of b1's range
  EXPECT_EQ(a.place(512), b3 + 256);  // the rest of it (256) is too small
  a.release(b0);
  a.release(b1 + 0);  // the block placed at b1 above: with b0 and the rest of b1's range, [0, 768) is free
  EXPECT_EQ(a.place(768), 0u);
  EXPECT_EQ(a.high_water(), b3 + 256 + 512);
  (void)b2;
}

TEST(OffsetArena, FreeingTheLastBlockLowersTheTop) {
  OffsetArena a(256);
  const size_t b0 = a.place(256), b1 = a.place(256);
  a.release(b1);
  a.release(b0);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.place(1024), 0u);  // nothing left below a top: the whole space from 0
  EXPECT_EQ(a.high_water(), 1024u);
}

// Two runs of the same sequence of places and releases, the second after the first was fully released: the same
// offsets (what lets a capture put its buffers where the previous capture of the same step put them).
TEST(OffsetArena, TheSameSequenceGivesTheSameOffsets) {
  OffsetArena a(256);
  auto run = [&] {
    std::vector<size_t> got, live;
    for (int i = 0; i < 40; ++i) {
      live.push_back(a.place(static_cast<size_t>(100 + 37 * (i % 7) * 256)));
      got.push_back(live.back());
      if (i % 3 == 2) {  // free an older block and the newest in turn
        a.release(live[live.size() / 2]);
        live.erase(live.begin() + static_cast<long>(live.size() / 2));
      }
    }
    for (size_t at : live) a.release(at);
    return got;
  };
  const std::vector<size_t> first = run();
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(run(), first);
  EXPECT_EQ(a.live_bytes(), 0u);
}

TEST(OffsetArena, RefusesAnOffsetItDidNotPlace) {
  OffsetArena a(256);
  const size_t b = a.place(10);
  EXPECT_THROW(a.release(b + 256), Error);
  a.release(b);
  EXPECT_THROW(a.release(b), Error);  // twice
  EXPECT_THROW(OffsetArena(100), Error);
}

}  // namespace
}  // namespace dg::test
