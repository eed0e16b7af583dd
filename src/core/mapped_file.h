// MappedFile: a read-only mmap of a whole file (RAII). Checkpoint shards are mapped, never read into memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dg {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // throws dg::Error naming the path
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drops this process's resident pages of [p, p + n) (the pages around it included); they are read from the file
  // again if touched. Bounds the memory of a pass that streams once through a mapping larger than RAM.
  void release(const void* p, size_t n) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace dg
