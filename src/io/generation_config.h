// GenerationConfig: sampler defaults from generation_config.json (DiffusionGemmaGenerationConfig), accepting
// both the flat HF 5.17 keys and the legacy nested spellings mlx-vlm reads (SPEC.md §4.1).
#pragma once

#include <string>
#include <vector>

namespace dg {

struct GenerationConfig {
  int max_new_tokens = 256;
  int max_denoising_steps = 48;
  double entropy_bound = 0.1;  // nats
  double t_min = 0.4;
  double t_max = 0.8;
  int stability_threshold = 1;
  double confidence_threshold = 0.005;
  std::vector<int> eos_ids;  // stop set; empty when the file names none
  int pad_id = -1;           // -1: unset
  int bos_id = -1;
};

// Parses generation_config.json text, validating as the reference does. Throws dg::Error naming `source`.
GenerationConfig parse_generation_config(const std::string& json_text, const std::string& source);
// Missing file -> defaults (the reference falls back to its global defaults too).
GenerationConfig load_generation_config(const std::string& path);

}  // namespace dg
