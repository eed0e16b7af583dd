#include "core/offset_arena.h"

#include <algorithm>
#include <iterator>

#include "core/error.h"

namespace dg {

OffsetArena::OffsetArena(size_t align) : align_(align) {
  DG_CHECK(align > 0 && (align & (align - 1)) == 0, "OffsetArena: the alignment {} is not a power of two", align);
}

size_t OffsetArena::place(size_t bytes) {
  bytes = std::max<size_t>(align_, (bytes + align_ - 1) & ~(align_ - 1));
  size_t at = top_;
  auto it = std::find_if(free_.begin(), free_.end(), [&](const auto& r) { return r.second >= bytes; });
  if (it != free_.end()) {
    at = it->first;
    const size_t rest = it->second - bytes;
    free_.erase(it);
    if (rest > 0) free_.emplace(at + bytes, rest);
  } else {
    top_ += bytes;
    high_water_ = std::max(high_water_, top_);
  }
  used_.emplace(at, bytes);
  live_ += bytes;
  return at;
}

size_t OffsetArena::release(size_t offset) {
  const auto u = used_.find(offset);
  DG_CHECK(u != used_.end(), "OffsetArena: no block was placed at offset {}", offset);
  const size_t bytes = u->second;
  used_.erase(u);
  live_ -= bytes;
  size_t at = offset, size = bytes;
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && next->first == at + size) {  // merge the free range after it
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {  // and the one before it
    const auto prev = std::prev(next);
    if (prev->first + prev->second == at) {
      at = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  if (at + size == top_) {
    top_ = at;  // the free space at the end joins the space beyond top_
  } else {
    free_.emplace(at, size);
  }
  return bytes;
}

}  // namespace dg
