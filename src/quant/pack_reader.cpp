#include "quant/pack_reader.h"

#include <filesystem>
#include <memory>

#include "core/error.h"
#include "io/json_fields.h"

namespace dg {

namespace fs = std::filesystem;

bool is_pack_dir(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / kPackManifestFile, ec);
}

Pack open_pack(const std::string& dir) {
  const std::string manifest_path = (fs::path(dir) / kPackManifestFile).string();
  const std::string blob_path = (fs::path(dir) / kPackBlobFile).string();
  Pack p;
  p.manifest = manifest_from_json(read_text_file(manifest_path), manifest_path);
  std::error_code ec;
  if (!fs::is_regular_file(blob_path, ec)) fail("pack '{}' has no {} (an incomplete copy?)", dir, kPackBlobFile);
  const uint64_t size = fs::file_size(blob_path, ec);
  if (ec) fail("cannot stat '{}': {}", blob_path, ec.message());
  check_manifest(p.manifest, size, dir);

  auto map = std::make_shared<MappedFile>(blob_path);
  DG_CHECK(map->size() == size, "'{}' changed size while it was being opened", blob_path);
  std::vector<TensorInfo> infos;
  infos.reserve(p.manifest.tensors.size());
  for (const PackEntry& e : p.manifest.tensors) {
    TensorInfo t;
    t.name = e.name;
    t.dtype = e.dtype;
    t.shape = e.shape;
    t.data = map->data() + e.offset;
    t.file = blob_path;
    t.nbytes = static_cast<size_t>(e.bytes);
    infos.push_back(std::move(t));
  }
  p.store = TensorStore::from_mapping(dir, std::move(map), std::move(infos));
  return p;
}

}  // namespace dg
