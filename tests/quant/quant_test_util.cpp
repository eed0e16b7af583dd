#include "quant/quant_test_util.h"

#include <filesystem>
#include <fstream>

#include "io/json_fields.h"
#include "io/safetensors.h"
#include "quant/pack_manifest.h"
#include "quant/pack_reader.h"
#include "quant/packed_tensor.h"
#include "model/quantize.h"
#include "support/paths.h"

namespace dg::test {

namespace fs = std::filesystem;

std::string quantize_fixture(const std::string& tag, const std::string& model_dir, const std::string& profile,
                             const std::vector<std::string>& sets) {
  QuantizeOptions o;
  o.model_dir = model_dir;
  o.out_dir = scratch_dir(tag) + "/pack";
  o.profile = profile;
  o.sets = sets;
  quantize_model(o);
  return o.out_dir;
}

std::string edited_pack(const std::string& pack, const std::function<void(nlohmann::json&)>& edit) {
  const std::string dir = scratch_dir("edited") + "/pack";
  fs::copy(pack, dir, fs::copy_options::recursive);
  const std::string path = dir + "/" + kPackManifestFile;
  nlohmann::json j = nlohmann::json::parse(read_text_file(path));
  edit(j);
  std::ofstream(path, std::ios::trunc) << j.dump(1);
  return dir;
}

std::string dequantised_twin(const std::string& pack) {
  const Pack p = open_pack(pack);
  const std::string dir = scratch_dir("twin");
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const PackEntry& e : p.manifest.tensors) tensors.emplace_back(e.name, unpack_tensor(p.store.view(e.name)));
  write_safetensors(dir + "/model.safetensors", tensors);
  for (const std::string& s : p.manifest.sidecars) fs::copy_file(fs::path(pack) / s, fs::path(dir) / s);
  return dir;
}

}  // namespace dg::test
