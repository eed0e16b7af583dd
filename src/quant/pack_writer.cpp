#include "quant/pack_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "quant/codec.h"
#include "quant/packed_tensor.h"

namespace dg {

namespace {

// Source bytes per chunk: the f32 copy and the encoded planes of one chunk are the writer's whole working set.
constexpr uint64_t kChunkBytes = 64ull << 20;

}  // namespace

BlobFile::BlobFile(const std::string& path, uint64_t size) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot create '{}': {}", path, std::strerror(errno));
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    fail("cannot size '{}' to {} bytes: {}", path, size, std::strerror(e));
  }
}

BlobFile::~BlobFile() {
  if (fd_ >= 0) ::close(fd_);
}

void BlobFile::write_at(uint64_t offset, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd_, p, std::min<size_t>(n, 1u << 30), static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail("error writing '{}' at offset {}: {}", path_, offset, std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
}

void BlobFile::finish() {
  if (::fsync(fd_) != 0) fail("cannot flush '{}': {}", path_, std::strerror(errno));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("cannot close '{}': {}", path_, std::strerror(errno));
}

void write_pack_tensor(BlobFile& out, const TensorInfo& src, const PackEntry& e, const PackProgress& progress) {
  const MappedFile& map = *src.mapping;
  if (!dtype_is_packed(e.dtype)) {  // raw: the source bytes verbatim
    DG_CHECK(e.dtype == src.dtype && e.bytes == src.nbytes, "pack entry '{}' does not match its source", e.name);
    for (uint64_t at = 0; at < src.nbytes; at += kChunkBytes) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunkBytes, src.nbytes - at));
      out.write_at(e.offset + at, src.data + at, n);
      map.release(src.data + at, n);
      progress(n);
    }
    return;
  }
  const PackedLayout L = packed_layout(e.dtype, e.shape);
  const size_t esz = dtype_size(src.dtype);
  const int64_t K = L.cols, per_matrix = L.rows / L.matrices;
  const uint8_t* base = src.data;
  const bool aligned = reinterpret_cast<uintptr_t>(base) % esz == 0;
  std::vector<uint8_t> staging;  // an element-aligned copy of a chunk whose source bytes are not aligned
  auto to_f32 = [&](int64_t row0, int64_t n, float* x) {
    const uint8_t* from = base + static_cast<size_t>(row0 * K) * esz;
    if (!aligned) {
      staging.assign(from, from + static_cast<size_t>(n * K) * esz);
      from = staging.data();
    }
    parallel_for(n, 16, [&](int64_t a, int64_t b) {
      convert_to_f32(from + static_cast<size_t>(a * K) * esz, src.dtype, static_cast<size_t>((b - a) * K), x + a * K);
    });
    for (int64_t i = 0; i < n * K; ++i)
      if (!std::isfinite(x[i]))
        fail("tensor '{}' in '{}' holds a non-finite value ({}) at element {}; refusing to quantize it", e.name,
             src.file, x[i], (row0 * K) + i);
  };
  int64_t chunk = std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes / (static_cast<uint64_t>(K) * esz)));
  std::vector<float> x;

  // nvfp4: one pass over each matrix for its global scale, written to the matrix plane first.
  std::vector<float> globals;
  if (e.dtype == DType::kNvFp4) {
    globals.assign(static_cast<size_t>(L.matrices), 0.0f);
    for (int64_t m = 0; m < L.matrices; ++m) {
      float amax = 0.0f;
      for (int64_t r = m * per_matrix; r < (m + 1) * per_matrix; r += chunk) {
        const int64_t n = std::min(chunk, (m + 1) * per_matrix - r);
        x.resize(static_cast<size_t>(n * K));
        to_f32(r, n, x.data());
        for (float v : x) amax = std::max(amax, std::fabs(v));
        map.release(base + static_cast<size_t>(r * K) * esz, static_cast<size_t>(n * K) * esz);
      }
      globals[static_cast<size_t>(m)] = nvfp4_global_scale(amax);
    }
    out.write_at(e.offset + static_cast<uint64_t>(L.offset[2]), globals.data(), globals.size() * 4);
  }

  std::vector<uint8_t> planes[kMaxPlanes];
  for (int64_t r = 0; r < L.rows; r += chunk) {
    const int64_t n = std::min(chunk, L.rows - r);
    x.resize(static_cast<size_t>(n * K));
    to_f32(r, n, x.data());
    uint8_t* dst[kMaxPlanes] = {};
    for (int p = 0; p < L.n_planes; ++p) {
      planes[p].resize(static_cast<size_t>(n * L.row_bytes[p]));
      dst[p] = planes[p].data();
    }
    encode_tensor_rows(e.dtype, L, x.data(), r, n, globals.empty() ? nullptr : globals.data(), dst);
    for (int p = 0; p < L.n_planes; ++p)
      if (L.row_bytes[p] > 0)
        out.write_at(e.offset + static_cast<uint64_t>(L.offset[p] + r * L.row_bytes[p]), planes[p].data(),
                     planes[p].size());
    const size_t src_bytes = static_cast<size_t>(n * K) * esz;
    map.release(base + static_cast<size_t>(r * K) * esz, src_bytes);
    progress(src_bytes);
  }
}

}  // namespace dg
