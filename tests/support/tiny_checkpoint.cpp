#include "support/tiny_checkpoint.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "io/safetensors.h"
#include "model/weights.h"
#include "support/paths.h"

namespace dg::test {

using nlohmann::json;

namespace {

// splitmix64 + Box-Muller: the same numbers on every platform (std:: distributions are not specified).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t s_;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Draws one value for tensor `name` (SPEC.md §6 recipe).
double draw(Rng& rng, const std::string& name, const Shape& shape) {
  if (ends_with(name, "layer_scalar"))  // encoder and decoder scalars differ
    return name.find("encoder") != std::string::npos ? 0.6 + 0.3 * rng.uniform() : 1.1 + 0.3 * rng.uniform();
  if (ends_with(name, "per_expert_scale")) return 0.5 + rng.uniform();
  if (ends_with(name, "q_norm.weight") || ends_with(name, "k_norm.weight")) return 0.5 + 0.1 * rng.normal();
  if (shape.rank == 1) return 1.0 + 0.3 * rng.normal();  // norms, router.scale
  if (ends_with(name, "embed_tokens.weight")) return 0.8 * rng.normal();
  if (name.find("experts.") != std::string::npos) return 0.15 * rng.normal();
  if (ends_with(name, "router.proj.weight")) return 3.0 * rng.normal();
  return rng.normal() / std::sqrt(static_cast<double>(shape[shape.rank - 1]));  // N(0, 1/fan_in)
}

Tensor random_tensor(Rng& rng, const std::string& name, const Shape& shape, DType dtype) {
  Tensor t = host_tensor(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const auto v = static_cast<float>(draw(rng, name, shape));
    switch (dtype) {
      case DType::kF32:
        t.as<float>()[i] = v;
        break;
      case DType::kBF16:
        t.as<uint16_t>()[i] = f32_to_bf16(v);
        break;
      case DType::kF16:
        t.as<uint16_t>()[i] = f32_to_f16(v);
        break;
      default:
        throw std::logic_error("tiny checkpoint weights must be a floating dtype");
    }
  }
  return t;
}

}  // namespace

json tiny_config_json(const TinyOptions& o) {
  json text = {
      {"model_type", "diffusion_gemma_text"},
      {"vocab_size", 64},
      {"hidden_size", 16},
      {"intermediate_size", 24},
      {"moe_intermediate_size", 8},
      {"num_hidden_layers", 3},
      {"num_attention_heads", 2},
      {"num_key_value_heads", 1},
      {"head_dim", 8},
      {"num_experts", 4},
      {"top_k_experts", 2},
      {"sliding_window", 4},
      {"max_position_embeddings", 4096},
      {"rms_norm_eps", 1e-6},
      {"final_logit_softcapping", 30.0},
      {"hidden_activation", "gelu_pytorch_tanh"},
      {"attention_bias", false},
      {"use_bidirectional_attention", "vision"},
      {"layer_types", {"sliding_attention", "sliding_attention", "full_attention"}},
      {"rope_parameters",
       {{"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
        {"full_attention", {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1e6}}}}},
      {"pad_token_id", 0},
      {"bos_token_id", 2},
      {"eos_token_id", 1},
  };
  if (o.global_head_dim_style) {
    text["global_head_dim"] = 16;
    text["num_global_key_value_heads"] = 1;
  } else {
    text["per_layer_config"] = {{"2", {{"head_dim", 16}, {"num_key_value_heads", 1}}}};
  }
  return {
      {"architectures", {"DiffusionGemmaForBlockDiffusion"}},
      {"model_type", "diffusion_gemma"},
      {"canvas_length", 8},
      {"image_token_id", 63},
      {"boi_token_id", 61},
      {"eoi_token_id", 62},
      {"tie_word_embeddings", true},
      {"text_config", text},
      {"vision_config", {{"model_type", "gemma4_vision"}, {"hidden_size", 32}}},
      {"transformers_version", "5.17.0"},
  };
}

json tiny_generation_config_json() {
  return {
      {"max_new_tokens", 16},
      {"max_denoising_steps", 48},
      {"sampler_config", {{"_cls_name", "EntropyBoundSamplerConfig"}, {"entropy_bound", 0.1}}},
      {"t_min", 0.4},
      {"t_max", 0.8},
      {"stability_threshold", 1},
      {"confidence_threshold", 0.005},
      {"eos_token_id", {1, 50, 60}},
      {"pad_token_id", 0},
      {"bos_token_id", 2},
      {"transformers_version", "5.17.0"},
  };
}

ModelConfig tiny_model_config(const TinyOptions& o) {
  return parse_model_config(tiny_config_json(o).dump(), "tiny config.json");
}

std::vector<std::pair<std::string, Tensor>> tiny_tensors(const ModelConfig& cfg, const TinyOptions& o) {
  Rng rng(o.seed);
  std::vector<std::pair<std::string, Tensor>> out;
  for (const WeightEntry& e : expected_weights(cfg))
    out.emplace_back(e.name, random_tensor(rng, e.name, e.shape, o.dtype));
  if (o.with_lm_head) out.emplace_back("lm_head.weight", out.front().second);  // the tied embedding
  if (o.with_encoder_copies) {
    std::vector<std::pair<std::string, Tensor>> copies;
    const std::string dec = "model.decoder.", enc = "model.encoder.language_model.";
    for (const auto& [name, t] : out)
      if (name.rfind(dec, 0) == 0 && !ends_with(name, "layer_scalar") &&
          name.find("self_conditioning") == std::string::npos)
        copies.emplace_back(enc + name.substr(dec.size()), t);
    out.insert(out.end(), copies.begin(), copies.end());
  }
  if (o.with_vision) {
    const std::pair<const char*, Shape> vision[] = {
        {"model.encoder.vision_tower.patch_embedder.input_proj.weight", Shape{32, 48}},
        {"model.encoder.vision_tower.encoder.layers.0.self_attn.q_proj.weight", Shape{32, 32}},
        {"model.encoder.vision_tower.encoder.layers.0.input_layernorm.weight", Shape{32}},
        {"model.encoder.embed_vision.embedding_projection.weight", Shape{cfg.hidden, 32}},
    };
    for (const auto& [name, shape] : vision) out.emplace_back(name, random_tensor(rng, name, shape, DType::kBF16));
  }
  return out;
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + path);
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

void write_raw_safetensors(const std::string& path, const std::string& header, const std::vector<uint8_t>& data,
                           std::optional<uint64_t> header_len) {
  const uint64_t n = header_len.value_or(header.size());
  std::vector<uint8_t> bytes(8);
  for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  write_bytes(path, bytes);
}

void write_checkpoint(const std::string& dir, const json& config,
                      const std::vector<std::pair<std::string, Tensor>>& tensors, const TinyOptions& o) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  write_text_file(dir + "/config.json", config.dump(2));
  if (o.with_generation_config) write_text_file(dir + "/generation_config.json", tiny_generation_config_json().dump(2));
  if (!o.sharded) {
    write_safetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}});
    return;
  }
  const size_t half = tensors.size() / 2;
  const std::vector<std::pair<std::string, Tensor>> parts[2] = {
      {tensors.begin(), tensors.begin() + static_cast<std::ptrdiff_t>(half)},
      {tensors.begin() + static_cast<std::ptrdiff_t>(half), tensors.end()}};
  json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
  size_t total = 0;
  for (int s = 0; s < 2; ++s) {
    const std::string file = fmt::format("model-0000{}-of-00002.safetensors", s + 1);
    write_safetensors(dir + "/" + file, parts[s], {{"format", "pt"}});
    for (const auto& [name, t] : parts[s]) {
      index["weight_map"][name] = file;
      total += t.nbytes();
    }
  }
  index["metadata"]["total_size"] = total;
  write_text_file(dir + "/model.safetensors.index.json", index.dump(2));
}

std::string make_tiny_checkpoint(const std::string& tag, const TinyOptions& o) {
  const std::string dir = scratch_dir(tag);
  write_checkpoint(dir, tiny_config_json(o), tiny_tensors(tiny_model_config(o), o), o);
  return dir;
}

}  // namespace dg::test
