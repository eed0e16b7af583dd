// The tile walk of the warp-specialised expert kernels (moe_ws.cu, moe_ws_q4.cu), one body for the kernels and for
// their CPU test (tests/ops/moe_ws_tiles_test.cpp): an expert with `rows` routed rows has ceil(rows / pass) passes
// times `col_tiles` column tiles (pass: the kernel's routed rows per pass, kWsPassRows or kWsQ4PassRows); tile t of
// the whole call is an expert's tile, each expert's in turn, passes fastest (neighbouring tiles read the same weight
// slice). An expert's passes split its rows evenly (130 rows: 65 and 65, not 128 and 2; no two more than a row
// apart), so the CTAs that read one weight slice at once multiply alike and stay together, the slice read from HBM
// once and from L2 by the others.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace dg {

inline constexpr int kWsPassRows = 128;   // routed rows per pass: W8A8 and bf16
inline constexpr int kWsQ4PassRows = 64;  // q4 (its A fragments in registers beside the accumulators)

struct WsTile {
  int e;   // the expert
  int r0;  // the pass's first sorted position
  int m;   // its rows, 1 .. pass
  int ct;  // the column tile
};

DG_HOST_DEVICE inline int ws_expert_tiles(int rows, int col_tiles, int pass = kWsPassRows) {
  return (rows + pass - 1) / pass * col_tiles;
}

// tile0[e]: the first tile of expert e (the scan of ws_expert_tiles over the experts before it); offsets[e]: its
// first sorted position, offsets[n_exp] the end. t must be below tile0[n_exp]'s total.
DG_HOST_DEVICE inline WsTile ws_tile_at(int t, const int32_t* tile0, const int32_t* offsets, int n_exp,
                                        int pass = kWsPassRows) {
  int lo = 0, hi = n_exp - 1;  // the last expert whose first tile is at or before t (experts without rows: their
  while (lo < hi) {            // first tile is their successor's, so the search passes over them)
    const int mid = (lo + hi + 1) / 2;
    if (tile0[mid] <= t) lo = mid;
    else hi = mid - 1;
  }
  const int rows = offsets[lo + 1] - offsets[lo], passes = (rows + pass - 1) / pass;
  const int base = rows / passes, extra = rows % passes;  // the first `extra` passes take one row more
  const int local = t - tile0[lo], p = local % passes;
  return WsTile{lo, offsets[lo] + p * base + (p < extra ? p : extra), base + (p < extra ? 1 : 0), local / passes};
}

}  // namespace dg
