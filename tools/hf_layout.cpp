#include "hf_layout.h"

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "core/error.h"
#include "model/synthetic.h"

namespace dg {

namespace {

using nlohmann::json;

int64_t vision_field(const json& v, const char* key) {
  if (!v.contains(key) || !v[key].is_number_integer() || v[key].get<int64_t>() < 1)
    fail("config.json: vision_config.{} must be a positive integer (the vision tower's tensor shapes need it)", key);
  return v[key].get<int64_t>();
}

}  // namespace

json diffusiongemma_26b_hf_config() {
  json layer_types = json::array(), per_layer = json::object();
  for (int i = 0; i < 30; ++i) {
    const bool full = (i + 1) % 6 == 0;
    layer_types.push_back(full ? "full_attention" : "sliding_attention");
    if (full) per_layer[std::to_string(i)] = {{"head_dim", 512}, {"num_key_value_heads", 2}};
  }
  json text = {{"attention_bias", false}, {"attention_dropout", 0.0}, {"bos_token_id", 2}, {"eos_token_id", 1},
               {"final_logit_softcapping", 30.0}, {"head_dim", 256}, {"hidden_activation", "gelu_pytorch_tanh"},
               {"hidden_size", 2816}, {"initializer_range", 0.02}, {"intermediate_size", 2112},
               {"layer_types", layer_types}, {"max_position_embeddings", 262144},
               {"model_type", "diffusion_gemma_text"}, {"moe_intermediate_size", 704}, {"num_attention_heads", 16},
               {"num_experts", 128}, {"num_hidden_layers", 30}, {"num_key_value_heads", 8}, {"pad_token_id", 0},
               {"per_layer_config", per_layer}, {"rms_norm_eps", 1e-6},
               {"rope_parameters",
                {{"full_attention", {{"partial_rotary_factor", 0.25}, {"rope_theta", 1000000.0},
                                     {"rope_type", "proportional"}}},
                 {"sliding_attention", {{"rope_theta", 10000.0}, {"rope_type", "default"}}}}},
               {"sliding_window", 1024}, {"tie_word_embeddings", true}, {"top_k_experts", 8},
               {"use_bidirectional_attention", "vision"}, {"vocab_size", 262144}};
  json vision = {{"attention_bias", false}, {"head_dim", 32}, {"hidden_activation", "gelu_pytorch_tanh"},
                 {"hidden_size", 64}, {"intermediate_size", 128}, {"model_type", "gemma4_vision"},
                 {"num_attention_heads", 2}, {"num_hidden_layers", 1}, {"num_key_value_heads", 2},
                 {"patch_size", 4}, {"pooling_kernel_size", 1}, {"position_embedding_size", 64},
                 {"rms_norm_eps", 1e-6}, {"rope_parameters", {{"rope_theta", 100.0}, {"rope_type", "axial"}}}};
  return {{"architectures", {"DiffusionGemmaForBlockDiffusion"}}, {"boi_token_id", 255999}, {"canvas_length", 256},
          {"dtype", "bfloat16"}, {"eoi_token_id", 258882}, {"image_token_id", 258880}, {"initializer_range", 0.02},
          {"model_type", "diffusion_gemma"}, {"text_config", text}, {"tie_word_embeddings", true},
          {"transformers_version", "5.17.0"}, {"vision_config", vision}};
}

json slice_hf_config(json config, int layers) {
  json& text = config.at("text_config");
  const int n = text.at("num_hidden_layers").get<int>();
  if (layers < 1 || layers > n) fail("--layers {} is outside [1, {}] (the config's num_hidden_layers)", layers, n);
  if (layers == n) return config;
  std::vector<std::string> types;  // the unsliced layer types (the reference's default rule without layer_types)
  for (int i = 0; i < n; ++i)
    types.push_back(text.contains("layer_types") ? text["layer_types"].at(static_cast<size_t>(i)).get<std::string>()
                    : (i + 1) % 6 == 0               ? "full_attention"
                                                     : "sliding_attention");
  text["num_hidden_layers"] = layers;
  json kept_types = json(std::vector<std::string>(types.begin(), types.begin() + layers));
  kept_types.back() = "full_attention";
  text["layer_types"] = kept_types;
  if (text.contains("per_layer_config")) {
    json kept = json::object(), first_full;
    int first_full_index = n;
    for (const auto& [key, value] : text["per_layer_config"].items()) {
      if (key.empty() || key.find_first_not_of("0123456789") != std::string::npos) {
        kept[key] = value;  // keyed by layer type: applies to the slice unchanged
        continue;
      }
      const int i = std::stoi(key);
      if (i < layers) kept[key] = value;
      if (i < n && types[static_cast<size_t>(i)] == "full_attention" && i < first_full_index) {
        first_full_index = i;
        first_full = value;
      }
    }
    const std::string last = std::to_string(layers - 1);
    if (!kept.contains(last) && !first_full.is_null()) kept[last] = first_full;
    text["per_layer_config"] = kept;
  }
  return config;
}

std::vector<HfTensor> hf_tensors(const json& config, const ModelConfig& cfg, uint64_t seed) {
  const std::vector<SyntheticTensor> plan = synthetic_plan(cfg, seed);
  uint64_t next = seed * 1000003ull + plan.size();  // the vision tower's draws follow the text weights'
  std::map<std::string, const SyntheticTensor*> recipes;
  for (const SyntheticTensor& t : plan) recipes[t.name] = &t;

  std::vector<HfTensor> out;
  auto text = [&](const std::string& name) {
    const SyntheticTensor& r = *recipes.at(name);
    out.push_back({name, r.shape, r.seed, r.scale, r.offset, true});
  };
  auto scalar = [&](const std::string& name) { out.push_back({name, Shape{1}, 0, 0.0f, 1.0f, false}); };
  const float sqrt3 = std::sqrt(3.0f);
  auto extra = [&](const std::string& name, Shape s, float scale, float offset) {
    out.push_back({name, s, ++next, scale, offset, true});
  };
  auto extra_linear = [&](const std::string& name, int64_t rows, int64_t in) {
    extra(name, Shape{rows, in}, sqrt3 / std::sqrt(static_cast<float>(in)), 0.0f);
  };

  // model.encoder: the text layers' own layer_scalars, the vision tower, the vision embedder.
  for (size_t i = 0; i < cfg.layers.size(); ++i) scalar(fmt::format("model.encoder.language_model.layers.{}.layer_scalar", i));
  if (config.contains("vision_config") && config["vision_config"].is_object()) {
    const json& v = config["vision_config"];
    const int64_t vh = vision_field(v, "hidden_size"), vi = vision_field(v, "intermediate_size");
    const int64_t heads = vision_field(v, "num_attention_heads"), kv = vision_field(v, "num_key_value_heads");
    const int64_t hd = vision_field(v, "head_dim"), patch = vision_field(v, "patch_size");
    const std::string t = "model.encoder.vision_tower.";
    extra_linear(t + "patch_embedder.input_proj.weight", vh, 3 * patch * patch);
    extra(t + "patch_embedder.position_embedding_table", Shape{2, vision_field(v, "position_embedding_size"), vh},
          0.8f * sqrt3, 0.0f);
    for (int64_t l = 0; l < vision_field(v, "num_hidden_layers"); ++l) {
      const std::string p = fmt::format("{}encoder.layers.{}.", t, l);
      extra_linear(p + "self_attn.q_proj.linear.weight", heads * hd, vh);
      extra_linear(p + "self_attn.k_proj.linear.weight", kv * hd, vh);
      extra_linear(p + "self_attn.v_proj.linear.weight", kv * hd, vh);
      extra_linear(p + "self_attn.o_proj.linear.weight", vh, heads * hd);
      extra(p + "self_attn.q_norm.weight", Shape{hd}, 0.1f * sqrt3, 0.5f);
      extra(p + "self_attn.k_norm.weight", Shape{hd}, 0.1f * sqrt3, 0.5f);
      extra_linear(p + "mlp.gate_proj.linear.weight", vi, vh);
      extra_linear(p + "mlp.up_proj.linear.weight", vi, vh);
      extra_linear(p + "mlp.down_proj.linear.weight", vh, vi);
      for (const char* n : {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                            "post_feedforward_layernorm"})
        extra(p + n + ".weight", Shape{vh}, 0.3f * sqrt3, 1.0f);
    }
    extra_linear("model.encoder.embed_vision.embedding_projection.weight", cfg.hidden, vh);
  }

  // model.decoder, each layer in its modules' order: attention, dense MLP, the four dense-path norms, router,
  // experts, the three MoE-path norms (the fixtures' shard boundaries fall between router and experts).
  text("model.decoder.embed_tokens.weight");
  for (size_t i = 0; i < cfg.layers.size(); ++i) {
    const std::string p = fmt::format("model.decoder.layers.{}.", i);
    scalar(p + "layer_scalar");
    for (const char* n : {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
                          "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                          "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                          "input_layernorm.weight", "post_attention_layernorm.weight",
                          "pre_feedforward_layernorm.weight", "post_feedforward_layernorm.weight",
                          "router.proj.weight", "router.scale", "router.per_expert_scale", "experts.gate_up_proj",
                          "experts.down_proj", "post_feedforward_layernorm_1.weight",
                          "post_feedforward_layernorm_2.weight", "pre_feedforward_layernorm_2.weight"})
      if (recipes.count(p + n)) text(p + n);  // no v_proj on full layers
  }
  for (const char* n : {"norm.weight", "self_conditioning.pre_norm.weight", "self_conditioning.gate_proj.weight",
                        "self_conditioning.up_proj.weight", "self_conditioning.down_proj.weight"})
    text(std::string("model.decoder.") + n);
  return out;
}

}  // namespace dg
