// Checkpoint: a DiffusionGemma model directory opened for inference — config.json (required),
// generation_config.json (optional), the tensors (mmap'd) and the bound text weights. The tensors come from the
// safetensors files of a Hugging Face directory, or from the blob of a .dgq pack (a directory with model.dgq.json,
// src/quant/). Every problem is one dg::Error naming the file or tensor. Layouts and spellings: docs/LOADING.md.
#pragma once

#include <optional>
#include <string>

#include "io/generation_config.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/weights.h"
#include "quant/pack_manifest.h"

namespace dg {

struct Checkpoint {
  std::string dir;
  ModelConfig config;
  // From generation_config.json. When that file is absent: the global defaults, with eos/pad/bos taken from
  // config.json's text_config (as the reference's GenerationConfig.from_model_config does).
  GenerationConfig generation;
  TensorStore store;
  std::optional<PackManifest> pack;  // set when `dir` is a .dgq pack
  // Views into the store's mappings; each view co-owns its mapping, so moving or destroying the Checkpoint
  // (or the store) never leaves a weight dangling.
  ModelWeights weights;

  static Checkpoint open(const std::string& dir);
};

}  // namespace dg
