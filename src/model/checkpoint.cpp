#include "model/checkpoint.h"

#include <filesystem>

#include "core/error.h"
#include "quant/pack_reader.h"

namespace dg {

namespace fs = std::filesystem;

Checkpoint Checkpoint::open(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) fail("checkpoint directory '{}' does not exist", dir);
  if (!fs::is_directory(dir, ec)) fail("checkpoint path '{}' is not a directory", dir);
  const std::string config_path = (fs::path(dir) / "config.json").string();
  if (!fs::exists(config_path, ec)) fail("checkpoint '{}' has no config.json", dir);
  const std::string gen_path = (fs::path(dir) / "generation_config.json").string();

  Checkpoint c;
  c.dir = dir;
  c.config = load_model_config(config_path);
  if (fs::exists(gen_path, ec)) {
    c.generation = load_generation_config(gen_path);
  } else {
    c.generation.eos_ids = {c.config.eos_id};
    c.generation.pad_id = c.config.pad_id;
    c.generation.bos_id = c.config.bos_id;
  }
  for (int id : c.generation.eos_ids)
    if (id >= c.config.vocab) fail("{}: eos_token_id {} is outside the vocabulary ({})", gen_path, id, c.config.vocab);
  if (c.generation.pad_id >= c.config.vocab)
    fail("{}: pad_token_id {} is outside the vocabulary ({})", gen_path, c.generation.pad_id, c.config.vocab);
  if (c.generation.bos_id >= c.config.vocab)
    fail("{}: bos_token_id {} is outside the vocabulary ({})", gen_path, c.generation.bos_id, c.config.vocab);

  if (is_pack_dir(dir)) {
    Pack p = open_pack(dir);
    c.store = std::move(p.store);
    c.pack = std::move(p.manifest);
  } else {
    c.store = TensorStore::open_dir(dir);
  }
  c.weights = bind_weights(c.config, c.store);
  return c;
}

}  // namespace dg
