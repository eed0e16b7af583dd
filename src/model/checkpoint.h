// Checkpoint: a DiffusionGemma model directory opened for inference — config.json (required),
// generation_config.json (optional), the safetensors tensors (mmap'd) and the bound text weights.
// Every problem is one dg::Error naming the file or tensor. Layouts and spellings: docs/LOADING.md.
#pragma once

#include <string>

#include "io/generation_config.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/weights.h"

namespace dg {

struct Checkpoint {
  std::string dir;
  ModelConfig config;
  // From generation_config.json. When that file is absent: the global defaults, with eos/pad/bos taken from
  // config.json's text_config (as the reference's GenerationConfig.from_model_config does).
  GenerationConfig generation;
  TensorStore store;
  // Views into the store's mappings; each view co-owns its mapping, so moving or destroying the Checkpoint
  // (or the store) never leaves a weight dangling.
  ModelWeights weights;

  static Checkpoint open(const std::string& dir);
};

}  // namespace dg
