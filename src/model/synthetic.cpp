#include "model/synthetic.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "backend/synthetic_fill.h"
#include "core/error.h"

namespace dg {

ModelConfig diffusiongemma_26b_config(int layers) {
  const char* json = R"({
    "model_type": "diffusion_gemma", "canvas_length": 256, "tie_word_embeddings": true,
    "text_config": {
      "vocab_size": 262144, "hidden_size": 2816, "intermediate_size": 2112, "moe_intermediate_size": 704,
      "num_hidden_layers": 30, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
      "global_head_dim": 512, "num_global_key_value_heads": 2, "num_experts": 128, "top_k_experts": 8,
      "sliding_window": 1024, "rms_norm_eps": 1e-6, "final_logit_softcapping": 30.0,
      "hidden_activation": "gelu_pytorch_tanh", "use_bidirectional_attention": "vision",
      "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 1
    }
  })";
  ModelConfig c = parse_model_config(json, "the built-in DiffusionGemma 26B-A4B config");
  DG_CHECK(layers >= 0 && layers <= c.n_layers, "--layers {}: the 26B-A4B shape has {} layers (1 to {} keeps the "
           "first that many, 0 all of them)", layers, c.n_layers, c.n_layers);
  if (layers > 0 && layers < c.n_layers) {
    c.layers.resize(static_cast<size_t>(layers));
    c.n_layers = layers;
    c.layers.back() = parse_model_config(json, "").layers[5];  // a full layer last, as the reference forces
  }
  return c;
}

std::vector<SyntheticTensor> synthetic_plan(const ModelConfig& cfg, uint64_t seed) {
  using Kind = SyntheticTensor::Kind;
  std::vector<SyntheticTensor> plan;
  uint64_t next = seed * 1000003ull;
  auto make = [&](std::string name, Shape s, float scale, float offset, Kind kind = Kind::kPlain) {
    plan.push_back({std::move(name), s, ++next, scale, offset, kind});
  };
  const float sqrt3 = std::sqrt(3.0f);  // uniform [-a, a] has std a / sqrt(3)
  auto linear = [&](std::string name, int64_t out, int64_t in, Kind kind = Kind::kPlain) {
    make(std::move(name), Shape{out, in}, sqrt3 / std::sqrt(static_cast<float>(in)), 0.0f, kind);
  };
  const int64_t H = cfg.hidden, I = cfg.intermediate, E = cfg.n_experts, F = cfg.expert_ff;
  auto norm = [&](std::string name) { make(std::move(name), Shape{H}, 0.3f * sqrt3, 1.0f); };
  const std::string top = "model.decoder.";
  make(top + "embed_tokens.weight", Shape{cfg.vocab, H}, 0.8f * sqrt3, 0.0f);
  norm(top + "norm.weight");
  norm(top + "self_conditioning.pre_norm.weight");
  linear(top + "self_conditioning.gate_proj.weight", I, H, Kind::kSelfCondLinear);
  linear(top + "self_conditioning.up_proj.weight", I, H, Kind::kSelfCondLinear);
  linear(top + "self_conditioning.down_proj.weight", H, I, Kind::kSelfCondLinear);
  for (size_t i = 0; i < cfg.layers.size(); ++i) {
    const LayerSpec& s = cfg.layers[i];
    const std::string p = fmt::format("{}layers.{}.", top, i);
    const int64_t D = s.head_dim, nkv = s.n_kv_heads;
    linear(p + "self_attn.q_proj.weight", cfg.n_heads * D, H, Kind::kLinear);
    linear(p + "self_attn.k_proj.weight", nkv * D, H, Kind::kLinear);
    if (s.sliding) linear(p + "self_attn.v_proj.weight", nkv * D, H, Kind::kLinear);
    linear(p + "self_attn.o_proj.weight", H, cfg.n_heads * D, Kind::kLinear);
    make(p + "self_attn.q_norm.weight", Shape{D}, 0.1f * sqrt3, 0.5f);
    make(p + "self_attn.k_norm.weight", Shape{D}, 0.1f * sqrt3, 0.5f);
    linear(p + "mlp.gate_proj.weight", I, H, Kind::kLinear);
    linear(p + "mlp.up_proj.weight", I, H, Kind::kLinear);
    linear(p + "mlp.down_proj.weight", H, I, Kind::kLinear);
    make(p + "router.proj.weight", Shape{E, H}, 3.0f * sqrt3, 0.0f);
    norm(p + "router.scale");
    make(p + "router.per_expert_scale", Shape{E}, 0.5f, 1.0f);
    make(p + "experts.gate_up_proj", Shape{E, 2 * F, H}, 0.15f * sqrt3, 0.0f, Kind::kExperts);
    make(p + "experts.down_proj", Shape{E, H, F}, 0.15f * sqrt3, 0.0f, Kind::kExperts);
    for (const char* n : {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                          "post_feedforward_layernorm", "post_feedforward_layernorm_1", "post_feedforward_layernorm_2",
                          "pre_feedforward_layernorm_2"})
      norm(p + n + ".weight");
  }
  return plan;
}

namespace {

constexpr std::string_view kSynthetic = "synthetic:26b-a4b";

bool known_profile(std::string_view p) {
  return std::find(kSyntheticProfiles.begin(), kSyntheticProfiles.end(), p) != kSyntheticProfiles.end();
}

// "bf16|q4|..."
std::string profile_names() { return fmt::format("{}", fmt::join(kSyntheticProfiles, "|")); }

// The packed format of a tensor of `kind` under `profile`; kBF16 where it stays unpacked.
DType synthetic_format(const std::string& profile, SyntheticTensor::Kind kind) {
  DG_CHECK(known_profile(profile), "unknown synthetic weight profile '{}': expected one of {}", profile,
           profile_names());
  if (profile == "fp8-all" && kind != SyntheticTensor::Kind::kPlain) return DType::kFp8;
  if (profile == "q4-fp8" && kind != SyntheticTensor::Kind::kPlain)
    return kind == SyntheticTensor::Kind::kExperts ? DType::kQ4 : DType::kFp8;
  if (profile == "bf16" || kind == SyntheticTensor::Kind::kPlain || kind == SyntheticTensor::Kind::kLinear)
    return DType::kBF16;
  if (kind == SyntheticTensor::Kind::kSelfCondLinear) return DType::kQ8;
  return profile == "q4" ? DType::kQ4 : profile == "fp8" ? DType::kFp8 : DType::kNvFp4;
}

}  // namespace

std::string synthetic_model_pattern() { return fmt::format("{}[:{}]", kSynthetic, profile_names()); }

std::optional<std::string> synthetic_profile(const std::string& model) {
  if (model.rfind(kSynthetic, 0) != 0) return std::nullopt;
  const std::string rest = model.substr(kSynthetic.size());
  if (rest.empty()) return "bf16";
  DG_CHECK(rest[0] == ':' && known_profile(std::string_view(rest).substr(1)),
           "unknown synthetic model '{}': expected {}", model, synthetic_model_pattern());
  return rest.substr(1);
}

Checkpoint synthetic_checkpoint(const std::string& model, int layers) {
  Checkpoint ck;
  ck.dir = model;
  ck.config = diffusiongemma_26b_config(layers);
  return ck;
}

std::vector<SyntheticFormat> synthetic_formats(const ModelConfig& cfg, const std::string& profile, int act_bytes) {
  std::vector<SyntheticFormat> out;
  for (const SyntheticTensor& t : synthetic_plan(cfg, 1)) {
    Tensor x;
    x.dtype = synthetic_format(profile, t.kind);
    x.shape = t.shape;
    const std::string name(dtype_name(x.dtype));
    auto it = std::find_if(out.begin(), out.end(), [&](const SyntheticFormat& f) { return f.format == name; });
    if (it == out.end()) it = out.insert(out.end(), SyntheticFormat{name, 0, 0});
    ++it->tensors;
    it->bytes += x.dtype == DType::kBF16 ? static_cast<size_t>(t.shape.numel()) * static_cast<size_t>(act_bytes)
                                         : x.nbytes();
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  return out;
}

size_t synthetic_weight_bytes(const ModelConfig& cfg, const std::string& profile, int act_bytes) {
  size_t bytes = 0;
  for (const SyntheticFormat& f : synthetic_formats(cfg, profile, act_bytes)) bytes += f.bytes;
  return bytes;
}

ModelWeights synthetic_weights(const ModelConfig& cfg, Backend& be, uint64_t seed, const std::string& profile,
                               int64_t peaked) {
  synthetic_format(profile, SyntheticTensor::Kind::kPlain);  // checks the name
  DG_CHECK(peaked >= 0 && peaked < cfg.vocab, "peaked tokens: {} of a vocabulary of {}", peaked, cfg.vocab);
  SyntheticFill& fill = synthetic_fill(be);
  std::map<std::string, Tensor> made;
  for (const SyntheticTensor& t : synthetic_plan(cfg, seed)) {
    Tensor x;
    if (const DType fmt = synthetic_format(profile, t.kind); fmt != DType::kBF16) {
      x = fill.synthetic_packed(fmt, t.shape, t.seed, t.scale);
    } else {
      x = be.alloc(t.shape);
      fill.fill_uniform(x, t.seed, t.scale, t.offset);
    }
    if (peaked > 0 && t.name == "model.decoder.embed_tokens.weight") {
      Tensor rest = row_slice(x, peaked, cfg.vocab - peaked);
      be.scale(rest, kPeakedRest);
    }
    made.emplace(t.name, std::move(x));
  }
  ModelWeights w = assemble_weights(cfg, [&](const std::string& name) { return made.at(name); });
  w.dtype = DType::kBF16;
  made.clear();  // the weights placed side by side leave their first copies
  place_shared_inputs(w, be);
  be.synchronize();
  return w;
}

}  // namespace dg
