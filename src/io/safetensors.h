// Safetensors checkpoints: one model.safetensors, or shards listed by model.safetensors.index.json.
// Files are mmap'd; every header is validated (JSON, dtypes, offsets inside the file) before any tensor is used.
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
  std::string file;  // shard path, for error messages
};

class TensorStore {
 public:
  // Opens `dir`: model.safetensors, or model.safetensors.index.json and every shard it names.
  static TensorStore open_dir(const std::string& dir);
  // Opens one safetensors file.
  static TensorStore open_file(const std::string& path);

  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const;  // throws dg::Error if absent
  Tensor view(const std::string& name) const;             // non-owning host view of the mapped bytes
  std::vector<std::string> names() const;                 // sorted
  const std::vector<std::string>& files() const { return files_; }
  size_t total_bytes() const;

 private:
  void add_file(const std::string& path);
  std::vector<std::shared_ptr<MappedFile>> maps_;
  std::vector<std::string> files_;
  std::map<std::string, TensorInfo> tensors_;
};

// Writes tensors to a safetensors file (used by tests and tools). Data must be host memory.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace dg
