// Spans of rows (RopeSpan: one sequence of a batched step each) as a kernel parameter: up to kRopeSpansPerLaunch of
// them per launch, row r of span s (row0[s] <= r < row_end[s]) at position r + shift[s]. Shared by rope_spans_cuda
// and heads_norm_cuda.
#pragma once

#include <cstdint>
#include <string>

#include "ops/rope/rope_cuda.h"

namespace dg {

struct SpanTable {
  int n = 0;
  int64_t row0[kRopeSpansPerLaunch], row_end[kRopeSpansPerLaunch], shift[kRopeSpansPerLaunch];
};

// spans[first ..] (at most kRopeSpansPerLaunch of n_spans) as one launch's table.
inline SpanTable span_table(const RopeSpan* spans, int n_spans, int first) {
  SpanTable t;
  t.n = n_spans - first < kRopeSpansPerLaunch ? n_spans - first : kRopeSpansPerLaunch;
  for (int k = 0; k < t.n; ++k) {
    const RopeSpan& sp = spans[first + k];
    t.row0[k] = sp.row0;
    t.row_end[k] = sp.row0 + sp.rows;
    t.shift[k] = sp.pos0 - sp.row0;
  }
  return t;
}

// An error naming `what` unless the spans cover rows [0, rows) in order without gaps (heads_norm_cuda,
// rope_table_cuda: every row has a span).
inline Status check_spans_cover(const RopeSpan* spans, int n_spans, int64_t rows, const char* what) {
  int64_t end = 0;
  for (int k = 0; k < n_spans; ++k) {
    if (spans[k].row0 != end || spans[k].rows < 0)
      return Status::error(std::string(what) + ": the spans must cover the rows in order without gaps (span " +
                           std::to_string(k) + ")");
    end += spans[k].rows;
  }
  if (end != rows)
    return Status::error(std::string(what) + ": the spans cover " + std::to_string(end) + " of " +
                         std::to_string(rows) + " rows");
  return Status::ok();
}

// The span holding `row`, or -1 (spans in row order): a binary search for the first span ending after it (a
// batched step's launch has one span per sequence, up to 64).
__device__ __forceinline__ int span_of(const SpanTable& t, int64_t row) {
  int lo = 0, hi = t.n;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (row >= t.row_end[mid]) lo = mid + 1;
    else hi = mid;
  }
  return lo == t.n || row < t.row0[lo] ? -1 : lo;
}

}  // namespace dg
