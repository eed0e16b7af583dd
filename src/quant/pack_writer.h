// Writing a pack's blob: a file of the final size written at absolute offsets (padding stays zero), and one
// tensor at a time streamed from its mmap'd source in row chunks of bounded size, the source pages released after
// each chunk, so memory stays bounded however large the checkpoint is.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "io/safetensors.h"
#include "quant/pack_manifest.h"

namespace dg {

class BlobFile {
 public:
  BlobFile(const std::string& path, uint64_t size);  // creates (truncates) the file at its final size
  ~BlobFile();
  BlobFile(const BlobFile&) = delete;
  BlobFile& operator=(const BlobFile&) = delete;

  void write_at(uint64_t offset, const void* data, size_t n);
  void finish();  // flushes to disk and closes; throws on an I/O error

 private:
  std::string path_;
  int fd_ = -1;
};

// Source bytes handled so far (for progress).
using PackProgress = std::function<void(uint64_t bytes)>;

// Writes entry `e` (its dtype: raw float or a packed format) from the source tensor `src`: raw bytes verbatim,
// or converted to f32 and encoded chunk by chunk. Throws dg::Error naming the tensor on a non-finite value.
void write_pack_tensor(BlobFile& out, const TensorInfo& src, const PackEntry& e, const PackProgress& progress);

}  // namespace dg
