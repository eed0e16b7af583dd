#include "io/safetensors.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "core/error.h"
#include "io/json_fields.h"

namespace dg {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Headers above this are refused as corrupt; the safetensors reference library uses the same 100 MB bound.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
// Largest tensor byte count we accept; keeps every size product far from int64/size_t overflow.
constexpr uint64_t kMaxTensorBytes = 1ull << 48;

std::optional<DType> dtype_from_name(const std::string& s) {
  if (s == "BF16") return DType::kBF16;
  if (s == "F16") return DType::kF16;
  if (s == "F32") return DType::kF32;
  if (s == "I32") return DType::kI32;
  if (s == "I64") return DType::kI64;
  if (s == "U8") return DType::kU8;
  if (s == "BOOL") return DType::kBool;
  return std::nullopt;
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Reads one header entry; every problem names the tensor and the file. `begin` receives the data offset.
TensorInfo parse_entry(const std::string& name, const json& e, const std::string& path, uint64_t data_size,
                       uint64_t* begin) {
  if (!e.is_object()) fail("tensor '{}' in '{}': header entry is not an object", name, path);
  auto dt = e.find("dtype");
  if (dt == e.end() || !dt->is_string()) fail("tensor '{}' in '{}': header entry has no string 'dtype'", name, path);
  const auto dtype = dtype_from_name(dt->get<std::string>());
  if (!dtype)
    fail("tensor '{}' in '{}' has unsupported dtype '{}' (supported: BF16, F16, F32, I32, I64, U8, BOOL)", name, path,
         dt->get<std::string>());

  auto sh = e.find("shape");
  if (sh == e.end() || !sh->is_array()) fail("tensor '{}' in '{}': header entry has no 'shape' array", name, path);
  if (sh->size() > 4) fail("tensor '{}' in '{}' has rank {}; at most 4 is supported", name, path, sh->size());
  TensorInfo t;
  t.name = name;
  t.file = path;
  t.dtype = *dtype;
  uint64_t numel = 1;
  for (const json& d : *sh) {
    const int64_t v =
        json_int(d, 0, static_cast<int64_t>(kMaxTensorBytes), path, fmt::format("tensor '{}' shape dimension", name));
    t.shape.dims[static_cast<size_t>(t.shape.rank++)] = v;
    if (v != 0 && numel > kMaxTensorBytes / static_cast<uint64_t>(v))
      fail("tensor '{}' in '{}': shape {} is implausibly large", name, path, sh->dump());
    numel *= static_cast<uint64_t>(v);
  }
  const uint64_t nbytes = numel * dtype_size(*dtype);
  if (nbytes > kMaxTensorBytes) fail("tensor '{}' in '{}': shape {} is implausibly large", name, path, sh->dump());

  auto off = e.find("data_offsets");
  if (off == e.end() || !off->is_array() || off->size() != 2)
    fail("tensor '{}' in '{}': header entry needs 'data_offsets' [begin, end]", name, path);
  const auto max_off = std::numeric_limits<int64_t>::max();
  const auto b =
      static_cast<uint64_t>(json_int((*off)[0], 0, max_off, path, fmt::format("tensor '{}' data_offsets", name)));
  const auto en =
      static_cast<uint64_t>(json_int((*off)[1], 0, max_off, path, fmt::format("tensor '{}' data_offsets", name)));
  if (en < b) fail("tensor '{}' in '{}': data_offsets [{}, {}] end before they begin", name, path, b, en);
  if (en - b != nbytes)
    fail("tensor '{}' in '{}': data_offsets [{}, {}] span {} bytes, but {} {} needs {}", name, path, b, en, en - b,
         dtype_name(*dtype), t.shape.str(), nbytes);
  if (en > data_size)
    fail(
        "tensor '{}' in '{}': data_offsets [{}, {}] run past the end of the data section ({} bytes); "
        "the file is truncated or corrupt",
        name, path, b, en, data_size);
  t.nbytes = static_cast<size_t>(nbytes);
  *begin = b;
  return t;
}

}  // namespace

void TensorStore::add_file(const std::string& path) {
  auto map = std::make_shared<MappedFile>(path);
  const uint64_t size = map->size();
  if (size < 8) fail("'{}' is not a safetensors file: {} bytes, too short for the 8-byte header length", path, size);
  const uint64_t n = read_u64_le(map->data());
  if (n > size - 8)
    fail("'{}': header length {} exceeds the {} bytes after the length field (truncated or not a safetensors file)",
         path, n, size - 8);
  if (n > kMaxHeaderBytes) fail("'{}': header length {} exceeds the 100 MiB limit", path, n);

  json header;
  try {
    header = json::parse(map->data() + 8, map->data() + 8 + n);
  } catch (const json::exception& e) {
    fail("'{}': malformed safetensors header JSON: {}", path, e.what());
  }
  if (!header.is_object()) fail("'{}': safetensors header is not a JSON object", path);

  const uint64_t data_start = 8 + n;
  const uint64_t data_size = size - data_start;
  std::vector<TensorInfo> infos;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;  // free-form string map; nothing in it is needed
    uint64_t begin = 0;
    TensorInfo t = parse_entry(name, entry, path, data_size, &begin);
    t.data = map->data() + data_start + begin;
    t.mapping = map;
    infos.push_back(std::move(t));
  }
  for (TensorInfo& t : infos) {
    auto it = tensors_.find(t.name);
    if (it != tensors_.end()) fail("tensor '{}' appears in both '{}' and '{}'", t.name, it->second.file, path);
    std::string name = t.name;
    tensors_.emplace(std::move(name), std::move(t));
  }
  maps_.push_back(std::move(map));
  files_.push_back(path);
}

TensorStore TensorStore::open_file(const std::string& path) {
  TensorStore s;
  s.source_ = path;
  s.add_file(path);
  return s;
}

TensorStore TensorStore::open_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail("checkpoint directory '{}' does not exist or is not a directory", dir);
  TensorStore s;
  s.source_ = dir;
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single_path = fs::path(dir) / "model.safetensors";
  if (!fs::exists(index_path, ec)) {
    if (!fs::exists(single_path, ec)) fail("no model.safetensors or model.safetensors.index.json in '{}'", dir);
    s.add_file(single_path.string());
    return s;
  }

  const std::string index_name = index_path.string();
  const json index = json_parse(read_text_file(index_name), index_name);
  if (!index.is_object()) fail("{}: expected a JSON object", index_name);
  auto wm = index.find("weight_map");
  if (wm == index.end() || !wm->is_object()) fail("{}: missing 'weight_map' object", index_name);
  if (wm->empty()) fail("{}: 'weight_map' names no tensors", index_name);

  std::map<std::string, std::string> shard_of;  // tensor -> shard path
  std::set<std::string> shards;
  for (const auto& [tensor, shard] : wm->items()) {
    if (!shard.is_string()) fail("{}: weight_map entry for tensor '{}' is not a file name", index_name, tensor);
    const std::string rel = shard.get<std::string>();
    const fs::path p(rel);
    bool escapes = rel.empty() || p.is_absolute();
    for (const auto& part : p) escapes = escapes || part == "..";
    if (escapes) fail("{}: shard name '{}' (tensor '{}') must be a file inside '{}'", index_name, rel, tensor, dir);
    const std::string full = (fs::path(dir) / p).string();
    if (!fs::is_regular_file(full, ec))
      fail("{}: shard '{}' (holding tensor '{}') does not exist in '{}'", index_name, rel, tensor, dir);
    shard_of.emplace(tensor, full);
    shards.insert(full);
  }
  for (const std::string& shard : shards) s.add_file(shard);
  for (const auto& [tensor, shard] : shard_of) {
    auto it = s.tensors_.find(tensor);
    if (it == s.tensors_.end() || it->second.file != shard)
      fail("{}: maps tensor '{}' to '{}', but that shard does not contain it", index_name, tensor, shard);
  }
  return s;
}

TensorStore TensorStore::from_mapping(const std::string& source, std::shared_ptr<MappedFile> map,
                                      std::vector<TensorInfo> tensors) {
  TensorStore s;
  s.source_ = source;
  for (TensorInfo& t : tensors) {
    t.mapping = map;
    t.file = map->path();
    if (s.tensors_.count(t.name) != 0) fail("'{}' lists tensor '{}' twice", source, t.name);
    std::string name = t.name;
    s.tensors_.emplace(std::move(name), std::move(t));
  }
  s.files_.push_back(map->path());
  s.maps_.push_back(std::move(map));
  return s;
}

const TensorInfo& TensorStore::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) fail("checkpoint '{}' has no tensor '{}'", source_, name);
  return it->second;
}

Tensor TensorStore::view(const std::string& name) const {
  const TensorInfo& t = info(name);
  const size_t align = dtype_is_packed(t.dtype) ? 64 : dtype_size(t.dtype);
  if (reinterpret_cast<uintptr_t>(t.data) % align != 0) {
    Tensor copy = host_tensor(t.dtype, t.shape);
    if (t.nbytes > 0) std::memcpy(copy.data, t.data, t.nbytes);
    return copy;
  }
  Tensor v = host_view(t.data, t.dtype, t.shape);
  v.owner = std::shared_ptr<void>(t.mapping, const_cast<uint8_t*>(t.data));
  return v;
}

std::vector<std::string> TensorStore::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& kv : tensors_) out.push_back(kv.first);
  return out;
}

size_t TensorStore::total_bytes() const {
  size_t n = 0;
  for (const auto& kv : tensors_) n += kv.second.nbytes;
  return n;
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__" || header.contains(name))
      fail("write_safetensors '{}': duplicate or reserved tensor name '{}'", path, name);
    if (t.device != Device::kCpu) fail("write_safetensors '{}': tensor '{}' is not in host memory", path, name);
    if (t.empty() && t.numel() != 0) fail("write_safetensors '{}': tensor '{}' has no data", path, name);
    std::vector<int64_t> shape(t.shape.dims.begin(), t.shape.dims.begin() + t.shape.rank);
    header[name] = {
        {"dtype", std::string(dtype_name(t.dtype))}, {"shape", shape}, {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned

  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) fail("cannot create '{}'", path);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  f.write(reinterpret_cast<const char*>(len), 8);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& [name, t] : tensors)
    if (t.nbytes() > 0) f.write(static_cast<const char*>(t.data), static_cast<std::streamsize>(t.nbytes()));
  f.flush();
  if (!f) fail("error writing '{}'", path);
}

}  // namespace dg
