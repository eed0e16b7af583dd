// Checks of a checkpoint's tensors beyond the structure Checkpoint::open validates: every weight the model reads is
// finite (`--check-tensors`; a packed weight as it decodes), and a .dgq pack's bytes match the per-tensor checksums
// of its manifest (`--verify`). `diffgemma verify` runs both. Each is one pass over the weights, in parallel.
#pragma once

#include <cstdint>

#include "model/checkpoint.h"

namespace dg {

// Throws dg::Error naming the first tensor holding a NaN or an infinity, its file and the element; returns the
// number of values checked.
int64_t check_weights_finite(const Checkpoint& ck);

// Throws dg::Error naming the first pack tensor whose bytes do not hash to its manifest's XXH3-64, or a pack
// written before checksums (format version 1) with the remedy; returns the bytes checked. `ck` must be a pack.
uint64_t verify_pack_checksums(const Checkpoint& ck);

}  // namespace dg
