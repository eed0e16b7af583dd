// Opening a .dgq pack: the manifest is parsed and checked (version, alignment, sizes, blob length) before the
// blob is mapped, and the tensors become a TensorStore of views into the mapping, so a pack and a Hugging Face
// directory bind the same way (src/model/weights.h).
#pragma once

#include <string>

#include "io/safetensors.h"
#include "quant/pack_manifest.h"

namespace dg {

// A pack directory is one with a model.dgq.json.
bool is_pack_dir(const std::string& dir);

struct Pack {
  PackManifest manifest;
  TensorStore store;
};

// Throws dg::Error naming the pack, the tensor and what to do on every refusal.
Pack open_pack(const std::string& dir);

}  // namespace dg
