// The Hugging Face checkpoint layout of a DiffusionGemma (transformers 5.17 `save_pretrained`, SPEC.md §1.2): the
// config.json of google/diffusiongemma-26B-A4B-it's shape, a slice of any config to its first layers, and every
// tensor the save writes (decoder, the encoder's layer_scalars, the vision tower) in state-dict order, which is the
// order save_pretrained fills its shards in. Each text tensor carries its recipe from synthetic_plan
// (src/model/synthetic.h), so the checkpoint holds the synthetic model's weights.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.h"
#include "io/model_config.h"

namespace dg {

// A config.json as transformers 5.17 saves google/diffusiongemma-26B-A4B-it's structure (full layers' dims under
// per_layer_config); the vision tower is the small one of scripts/bench_reference.py, not the published one.
nlohmann::json diffusiongemma_26b_hf_config();

// `config` with only its first `layers` decoder layers; the last kept layer becomes full_attention (the reference
// forces it), taking the dims of the config's first full layer. Throws dg::Error when `layers` is out of range.
nlohmann::json slice_hf_config(nlohmann::json config, int layers);

struct HfTensor {
  std::string name;
  Shape shape;
  // Element i is bf16(synthetic_uniform(seed, i, scale, offset)) (src/ops/elementwise/synthetic_uniform.h).
  uint64_t seed = 0;
  float scale = 0.0f, offset = 0.0f;
  bool parameter = true;  // false for the layer_scalar buffers (not counted in the index's total_parameters)
};

// Every tensor save_pretrained writes for `config` (parsed as `cfg`), in state-dict order; `seed` as in
// synthetic_weights(cfg, backend, seed). layer_scalars are 1, as the synthetic model's.
std::vector<HfTensor> hf_tensors(const nlohmann::json& config, const ModelConfig& cfg, uint64_t seed);

}  // namespace dg
