// Row digests of a KV cache's stored bytes, the pieces of KvCache::fingerprint: lane-strided FNV-1a over the row's
// 64-bit words. Lane l (0..31) hashes words l, l + 32, l + 64, ... of the row (little-endian; a last partial word is
// zero-padded) from the FNV offset basis; the digest hashes the 32 lane values, in lane order, the same way. The
// CUDA twin (row_digests_cuda, kv_digest.cu) gives a warp to a row, so a device cache is fingerprinted where it
// lives and only 8 bytes a row cross to the host.
#pragma once

#include <cstdint>

namespace dg {

inline constexpr uint64_t kFnvBasis = 1469598103934665603ull;
inline constexpr uint64_t kFnvPrime = 1099511628211ull;
inline constexpr int kDigestLanes = 32;

uint64_t row_digest(const uint8_t* row, int64_t row_bytes);

}  // namespace dg
