#include "quant/pack_manifest.h"

#include <charconv>
#include <map>

#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "core/error.h"
#include "core/packed_layout.h"

namespace dg {

using nlohmann::ordered_json;

namespace {

constexpr const char* kRecreate = "re-create it with `diffgemma quantize`";

DType dtype_from_manifest(const std::string& format, const ordered_json& e, const std::string& path,
                          const std::string& name) {
  if (format == "q4") return DType::kQ4;
  if (format == "q6") return DType::kQ6;
  if (format == "q8") return DType::kQ8;
  if (format == "nvfp4") return DType::kNvFp4;
  if (format == "fp8") return DType::kFp8;
  if (format != "raw") fail("{}: tensor '{}' has unknown format '{}'", path, name, format);
  const std::string dt = e.value("dtype", "");
  if (dt == "BF16") return DType::kBF16;
  if (dt == "F16") return DType::kF16;
  if (dt == "F32") return DType::kF32;
  fail("{}: raw tensor '{}' has dtype '{}' (expected BF16, F16 or F32)", path, name, dt);
}

template <typename T>
T field(const ordered_json& j, const char* key, const std::string& path, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) fail("{}: {} has no '{}'", path, where, key);
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    fail("{}: {} has a malformed '{}'", path, where, key);
  }
}

}  // namespace

uint64_t pack_checksum(const void* data, size_t n) { return XXH3_64bits(data, n); }

uint64_t pack_entry_bytes(DType dtype, const Shape& shape) {
  if (dtype_is_packed(dtype)) return static_cast<uint64_t>(packed_layout(dtype, shape).total);
  return static_cast<uint64_t>(shape.numel()) * dtype_size(dtype);
}

std::string manifest_to_json(const PackManifest& m) {
  ordered_json j;
  j["format"] = kPackFormatTag;
  j["version"] = m.version;
  j["profile"] = m.profile;
  j["sets"] = ordered_json::object();
  for (const auto& [k, v] : m.sets) j["sets"][k] = v;
  j["classes"] = ordered_json::object();
  for (const auto& [k, v] : m.classes) j["classes"][k] = v;
  j["source"] = m.source;
  j["sidecars"] = m.sidecars;
  j["blob"] = {{"file", kPackBlobFile}, {"bytes", m.blob_bytes}, {"alignment", kPackAlign}};
  j["tensors"] = ordered_json::array();
  for (const PackEntry& e : m.tensors) {
    ordered_json t;
    t["name"] = e.name;
    t["class"] = e.cls;
    t["format"] = dtype_is_packed(e.dtype) ? std::string(dtype_name(e.dtype)) : "raw";
    if (!dtype_is_packed(e.dtype)) t["dtype"] = std::string(dtype_name(e.dtype));
    t["shape"] = std::vector<int64_t>(e.shape.dims.begin(), e.shape.dims.begin() + e.shape.rank);
    t["offset"] = e.offset;
    t["bytes"] = e.bytes;
    if (e.xxh3) t["xxh3"] = fmt::format("{:016x}", *e.xxh3);
    j["tensors"].push_back(std::move(t));
  }
  return j.dump(1) + "\n";
}

PackManifest manifest_from_json(const std::string& text, const std::string& path) {
  ordered_json j;  // keeps the classes in the order they were written
  try {
    j = ordered_json::parse(text);
  } catch (const ordered_json::exception& e) {
    fail("{}: malformed JSON: {}", path, e.what());
  }
  if (!j.is_object() || j.value("format", "") != kPackFormatTag)
    fail("{}: not a diffgemma pack manifest (no \"format\": \"{}\")", path, kPackFormatTag);
  PackManifest m;
  m.version = field<int>(j, "version", path, "the manifest");
  if (m.version > kPackVersion)
    fail("{}: pack format version {} is newer than this diffgemma reads (up to {}); update diffgemma, or {}", path,
         m.version, kPackVersion, kRecreate);
  if (m.version < 1) fail("{}: invalid pack format version {}", path, m.version);
  m.profile = field<std::string>(j, "profile", path, "the manifest");
  for (const char* key : {"sets", "classes"}) {
    const ordered_json obj = field<ordered_json>(j, key, path, "the manifest");
    if (!obj.is_object()) fail("{}: '{}' is not an object", path, key);
    for (const auto& [k, v] : obj.items()) {
      if (!v.is_string()) fail("{}: '{}.{}' is not a string", path, key, k);
      (std::string(key) == "sets" ? m.sets : m.classes).emplace_back(k, v.get<std::string>());
    }
  }
  m.source = j.value("source", "");
  m.sidecars = j.value("sidecars", std::vector<std::string>{});
  const ordered_json blob = field<ordered_json>(j, "blob", path, "the manifest");
  if (field<std::string>(blob, "file", path, "'blob'") != kPackBlobFile)
    fail("{}: the blob must be '{}'", path, kPackBlobFile);
  m.blob_bytes = field<uint64_t>(blob, "bytes", path, "'blob'");
  const ordered_json tensors = field<ordered_json>(j, "tensors", path, "the manifest");
  if (!tensors.is_array()) fail("{}: 'tensors' is not a list", path);
  for (const ordered_json& t : tensors) {
    if (!t.is_object()) fail("{}: a 'tensors' entry is not an object", path);
    PackEntry e;
    e.name = field<std::string>(t, "name", path, "a tensor entry");
    const std::string where = "tensor '" + e.name + "'";
    e.cls = t.value("class", "");
    e.dtype = dtype_from_manifest(field<std::string>(t, "format", path, where), t, path, e.name);
    const auto dims = field<std::vector<int64_t>>(t, "shape", path, where);
    if (dims.size() > 4) fail("{}: {} has rank {}; at most 4 is supported", path, where, dims.size());
    uint64_t numel = 1;
    for (int64_t d : dims) {
      if (d < 0 || d > (int64_t{1} << 40)) fail("{}: {} has an implausible dimension {}", path, where, d);
      numel *= static_cast<uint64_t>(d);
      if (numel > (uint64_t{1} << 44)) fail("{}: {} has an implausibly large shape", path, where);
      e.shape.dims[static_cast<size_t>(e.shape.rank++)] = d;
    }
    e.offset = field<uint64_t>(t, "offset", path, where);
    e.bytes = field<uint64_t>(t, "bytes", path, where);
    if (m.version >= kPackFirstChecksumVersion) {
      const std::string hex = field<std::string>(t, "xxh3", path, where);
      uint64_t v = 0;
      const auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), v, 16);
      if (hex.size() != 16 || ec != std::errc() || end != hex.data() + hex.size())
        fail("{}: {} has a malformed 'xxh3' ('{}'; expected 16 hex digits); {}", path, where, hex, kRecreate);
      e.xxh3 = v;
    }
    m.tensors.push_back(std::move(e));
  }
  return m;
}

void check_manifest(const PackManifest& m, uint64_t blob_size, const std::string& dir) {
  const std::string blob = dir + "/" + kPackBlobFile;
  if (blob_size < m.blob_bytes)
    fail("'{}' is truncated: {} bytes, but the manifest records {} (an interrupted copy or download?); {}", blob,
         blob_size, m.blob_bytes, kRecreate);
  if (blob_size > m.blob_bytes)
    fail("'{}' has {} bytes, but the manifest records {}: the blob and the manifest do not belong together; {}", blob,
         blob_size, m.blob_bytes, kRecreate);
  uint64_t end = 0;
  for (const PackEntry& e : m.tensors) {
    const std::string where = fmt::format("tensor '{}' in pack '{}'", e.name, dir);
    if (e.offset % kPackAlign != 0)
      fail("{}: offset {} is not {}-byte aligned (GPU kernels read planes at aligned addresses); {}", where, e.offset,
           kPackAlign, kRecreate);
    if (dtype_is_packed(e.dtype))
      if (const char* why = packed_shape_error(e.dtype, e.shape))
        fail("{}: a {} tensor cannot have shape {}: {}", where, dtype_name(e.dtype), e.shape.str(), why);
    const uint64_t want = pack_entry_bytes(e.dtype, e.shape);
    const std::string format = (dtype_is_packed(e.dtype) ? "" : "raw ") + std::string(dtype_name(e.dtype));
    if (e.bytes != want)
      fail("{}: the manifest records {} bytes, but {} {} takes {}; {}", where, e.bytes, format, e.shape.str(), want,
           kRecreate);
    if (e.offset < end) fail("{}: bytes [{}, {}) overlap the previous tensor (ending at {}); {}", where, e.offset,
                             e.offset + e.bytes, end, kRecreate);
    if (e.offset > m.blob_bytes || e.bytes > m.blob_bytes - e.offset)
      fail("{}: bytes [{}, {}) run past the end of the {}-byte blob; {}", where, e.offset, e.offset + e.bytes,
           m.blob_bytes, kRecreate);
    end = e.offset + e.bytes;
  }
}

}  // namespace dg
