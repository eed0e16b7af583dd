// The tile walk of the warp-specialised W8A8 expert kernel (moe_ws.cu), one body for the kernel and for its CPU test
// (tests/ops/moe_ws_tiles_test.cpp): an expert with `rows` routed rows has ceil(rows / kWsPassRows) passes times
// `col_tiles` column tiles; tile t of the whole call is an expert's tile, each expert's in turn, passes fastest
// (neighbouring tiles read the same weight slice).
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace dg {

inline constexpr int kWsPassRows = 128;  // routed rows per pass

struct WsTile {
  int e;   // the expert
  int r0;  // the pass's first sorted position
  int m;   // its rows, 1 .. kWsPassRows
  int ct;  // the column tile
};

DG_HOST_DEVICE inline int ws_expert_tiles(int rows, int col_tiles) {
  return (rows + kWsPassRows - 1) / kWsPassRows * col_tiles;
}

// tile0[e]: the first tile of expert e (the scan of ws_expert_tiles over the experts before it); offsets[e]: its
// first sorted position, offsets[n_exp] the end. t must be below tile0[n_exp]'s total.
DG_HOST_DEVICE inline WsTile ws_tile_at(int t, const int32_t* tile0, const int32_t* offsets, int n_exp) {
  int lo = 0, hi = n_exp - 1;  // the last expert whose first tile is at or before t (experts without rows: their
  while (lo < hi) {            // first tile is their successor's, so the search passes over them)
    const int mid = (lo + hi + 1) / 2;
    if (tile0[mid] <= t) lo = mid;
    else hi = mid - 1;
  }
  const int rows = offsets[lo + 1] - offsets[lo], passes = (rows + kWsPassRows - 1) / kWsPassRows;
  const int local = t - tile0[lo], pass = local % passes, left = rows - pass * kWsPassRows;
  return WsTile{lo, offsets[lo] + pass * kWsPassRows, left < kWsPassRows ? left : kWsPassRows, local / passes};
}

}  // namespace dg
