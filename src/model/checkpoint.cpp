#include "model/checkpoint.h"

#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

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
  // Without generation_config.json, or without stop ids in it (absent or null), generation would never stop on an
  // end-of-turn token: the stop set falls back to config.json's eos ids, as the reference's
  // GenerationConfig.from_model_config does, with a warning.
  if (fs::exists(gen_path, ec)) {
    c.generation = load_generation_config(gen_path);
    if (c.generation.eos_ids.empty()) {
      c.generation.eos_ids = c.config.eos_ids;
      fmt::print(stderr, "warning: {} names no eos_token_id; stopping on config.json's [{}]\n", gen_path,
                 fmt::join(c.config.eos_ids, ", "));
    }
  } else {
    c.generation.eos_ids = c.config.eos_ids;
    fmt::print(stderr,
               "warning: checkpoint '{}' has no generation_config.json; using the default sampler settings and "
               "stopping on config.json's eos ids [{}]\n",
               dir, fmt::join(c.config.eos_ids, ", "));
  }
  if (c.generation.pad_id < 0) c.generation.pad_id = c.config.pad_id;
  if (c.generation.bos_id < 0) c.generation.bos_id = c.config.bos_id;
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
