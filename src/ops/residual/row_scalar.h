// The layer_scalar a feed-forward tail multiplies its rows by (ffn_tail, SPEC.md §2.6). A forward may carry the
// encoder's rows and the decoder's together (a committed block encoded in the next step's forward): the encoder's
// scalar then applies to rows [0, split) and the decoder's to the rows after. From a float: one scalar for all rows.
#pragma once

#include <cstdint>
#include <limits>

namespace dg {

struct RowScalar {
  float first = 1.0f;
  int64_t split = std::numeric_limits<int64_t>::max();
  float rest = 1.0f;

  RowScalar(float s) : first(s), rest(s) {}  // NOLINT(google-explicit-constructor): a float is one scalar
  RowScalar(float first_rows, int64_t n, float rest_rows) : first(first_rows), split(n), rest(rest_rows) {}
};

}  // namespace dg
