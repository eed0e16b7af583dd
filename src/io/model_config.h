// ModelConfig: the text-model structure read from a DiffusionGemma config.json (DiffusionGemmaConfig with a
// nested text_config), with every per-layer value resolved. Reference: configuration_diffusion_gemma.py and
// SPEC.md §1.1 (per_layer_config vs global_head_dim spellings, layer_types default, rope parameters).
#pragma once

#include <string>
#include <vector>

namespace dg {

struct RopeParams {
  std::string type = "default";        // "default" | "proportional"
  double theta = 10000.0;
  double partial_rotary_factor = 1.0;  // proportional only
  double factor = 1.0;                 // divides inv_freq
};

struct LayerSpec {
  bool sliding = true;  // sliding_attention vs full_attention
  int head_dim = 0;
  int n_kv_heads = 0;
  RopeParams rope;
};

struct ModelConfig {
  // top level
  int canvas = 256;                 // canvas_length, C
  int image_token_id = 258880;      // replaced by pad_id before the encoder embedding
  bool tie_word_embeddings = true;  // must be true

  // text_config
  int vocab = 0;
  int hidden = 0;
  int intermediate = 0;  // dense MLP and self-conditioning MLP width
  int expert_ff = 0;     // moe_intermediate_size
  int n_layers = 0;
  int n_heads = 0;
  int n_experts = 0;
  int top_k = 0;
  int window = 0;  // sliding_window, W
  double rms_eps = 1e-6;
  double softcap = 30.0;  // final_logit_softcapping; 0 means none (JSON null)
  int pad_id = 0, bos_id = 2, eos_id = 1;
  std::vector<int> eos_ids{1};  // every eos_token_id (a list keeps all of them); eos_id is the first
  int64_t max_positions = 0;    // max_position_embeddings: positions the model was trained for; 0: not stated
  std::vector<LayerSpec> layers;  // size n_layers

  int n_full_layers() const;
  // Inverse RoPE frequencies (length head_dim/2) for layer l, computed in f32 as the reference does.
  std::vector<float> rope_inv_freq(int l) const;
};

// Parses config.json text; `source` names the file in error messages. Throws dg::Error.
ModelConfig parse_model_config(const std::string& json_text, const std::string& source);
ModelConfig load_model_config(const std::string& path);

}  // namespace dg
