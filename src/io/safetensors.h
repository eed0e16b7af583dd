// Safetensors checkpoints: one model.safetensors, or shards listed by model.safetensors.index.json.
// Files are mmap'd; every header is validated (JSON, dtypes, offsets inside the file) before any tensor is used.
// Format: 8-byte little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets}}, data.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/tensor.h"

namespace dg {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  const uint8_t* data = nullptr;  // inside the shard's mapping
  size_t nbytes = 0;
  std::string file;                     // shard path, for error messages
  std::shared_ptr<MappedFile> mapping;  // keeps `data` valid; views share it
};

class TensorStore {
 public:
  // Opens `dir`: model.safetensors, or model.safetensors.index.json and every shard it names.
  static TensorStore open_dir(const std::string& dir);
  // Opens one safetensors file.
  static TensorStore open_file(const std::string& path);
  // A store over tensors already validated to lie inside `map` (the .dgq pack reader builds one).
  static TensorStore from_mapping(const std::string& source, std::shared_ptr<MappedFile> map,
                                  std::vector<TensorInfo> tensors);

  // The directory or file this store was opened from (for messages).
  const std::string& source() const { return source_; }

  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const;  // throws dg::Error if absent
  // Read-only host view of the mapped bytes; its owner keeps the mapping alive. A tensor whose bytes are not
  // aligned to its element size (64 bytes for a packed format) is returned as an aligned copy instead.
  Tensor view(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  const std::vector<std::string>& files() const { return files_; }
  size_t total_bytes() const;

 private:
  void add_file(const std::string& path);
  std::string source_;
  std::vector<std::shared_ptr<MappedFile>> maps_;
  std::vector<std::string> files_;
  std::map<std::string, TensorInfo> tensors_;
};

// Writes tensors to a safetensors file (used by tests and tools). Data must be host memory.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace dg
