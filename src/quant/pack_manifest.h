// The .dgq pack manifest (model.dgq.json): format version, profile, per-class formats, and every tensor's
// format, shape, byte range in the one blob (model.dgq.bin) and, from version 2, the XXH3-64 checksum of those
// bytes. Offsets are u64 and 64-byte aligned; tensors are listed in blob order and never overlap. Field by field:
// docs/FORMATS.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace dg {

// The newest manifest version this binary reads and the one it writes; version 1 (no checksums) is still read.
inline constexpr int kPackVersion = 2;
inline constexpr int kPackFirstChecksumVersion = 2;
inline constexpr const char* kPackFormatTag = "diffgemma.dgq";
inline constexpr const char* kPackManifestFile = "model.dgq.json";
inline constexpr const char* kPackBlobFile = "model.dgq.bin";
inline constexpr uint64_t kPackAlign = 64;

struct PackEntry {
  std::string name;
  std::string cls;               // weight class (descriptive; dispatch reads dtype)
  DType dtype = DType::kBF16;    // a float dtype for raw tensors, else the packed format
  Shape shape;                   // the logical shape, as in the source checkpoint
  uint64_t offset = 0, bytes = 0;
  std::optional<uint64_t> xxh3;  // XXH3-64 of the tensor's bytes in the blob (every tensor from version 2)
};

struct PackManifest {
  int version = kPackVersion;
  std::string profile;
  std::vector<std::pair<std::string, std::string>> sets;     // --set overrides as given
  std::vector<std::pair<std::string, std::string>> classes;  // class -> format, resolved
  std::string source;                                        // the source directory's name
  std::vector<std::string> sidecars;                         // config.json, tokenizer.json, ... copied verbatim
  uint64_t blob_bytes = 0;
  std::vector<PackEntry> tensors;
};

// Bytes a tensor of this dtype and shape occupies in the blob.
uint64_t pack_entry_bytes(DType dtype, const Shape& shape);
// The checksum a manifest records for a tensor's bytes: XXH3-64 (seed 0).
uint64_t pack_checksum(const void* data, size_t n);

// Deterministic JSON text (fixed field order, no timestamps).
std::string manifest_to_json(const PackManifest& m);
// Parses and type-checks a manifest; a version newer than kPackVersion is refused first. `path` names it in errors.
PackManifest manifest_from_json(const std::string& text, const std::string& path);
// Alignment, sizes, ordering and the blob's length (blob_size: the file's size), before anything is mapped.
void check_manifest(const PackManifest& m, uint64_t blob_size, const std::string& dir);

}  // namespace dg
