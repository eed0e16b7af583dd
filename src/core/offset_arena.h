// Offsets for blocks in one region, first fit, freed neighbours merged: the same sequence of places and releases
// always gives the same offsets, whatever the region's real size (the capture arena, core/cuda/capture_arena.h, maps
// them onto device memory so that each capture of a step puts its buffers at the same addresses). Host code.
#pragma once

#include <cstddef>
#include <map>

namespace dg {

class OffsetArena {
 public:
  explicit OffsetArena(size_t align = 256);
  size_t place(size_t bytes);     // a new block's offset (bytes rounded up to the alignment; 0 bytes take one unit)
  size_t release(size_t offset);  // frees the block placed at offset and returns its size; an error for any other
  size_t high_water() const { return high_water_; }  // the furthest end of a block ever placed
  size_t live_bytes() const { return live_; }
  bool empty() const { return used_.empty(); }

 private:
  size_t align_;
  size_t top_ = 0;         // the end of the last block still placed: free space beyond it is not in free_
  size_t high_water_ = 0;
  size_t live_ = 0;
  std::map<size_t, size_t> free_;  // offset -> bytes, every range below top_ that no block holds
  std::map<size_t, size_t> used_;  // offset -> bytes
};

}  // namespace dg
