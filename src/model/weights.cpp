#include "model/weights.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "core/error.h"
#include "quant/policy.h"

namespace dg {

namespace {

constexpr const char* kDecoder = "model.decoder.";
constexpr const char* kDecoderLayers = "model.decoder.layers.";
constexpr const char* kEncoderText = "model.encoder.language_model.";
constexpr const char* kEncoderLayers = "model.encoder.language_model.layers.";

// Per-layer tensor suffixes in checkpoint order; v_proj exists on sliding layers only.
constexpr const char* kLayerSuffixes[] = {"self_attn.q_proj.weight",
                                          "self_attn.k_proj.weight",
                                          "self_attn.v_proj.weight",
                                          "self_attn.o_proj.weight",
                                          "self_attn.q_norm.weight",
                                          "self_attn.k_norm.weight",
                                          "mlp.gate_proj.weight",
                                          "mlp.up_proj.weight",
                                          "mlp.down_proj.weight",
                                          "router.proj.weight",
                                          "router.scale",
                                          "router.per_expert_scale",
                                          "experts.gate_up_proj",
                                          "experts.down_proj",
                                          "input_layernorm.weight",
                                          "post_attention_layernorm.weight",
                                          "pre_feedforward_layernorm.weight",
                                          "post_feedforward_layernorm.weight",
                                          "post_feedforward_layernorm_1.weight",
                                          "post_feedforward_layernorm_2.weight",
                                          "pre_feedforward_layernorm_2.weight",
                                          "layer_scalar"};

constexpr const char* kDecoderTop[] = {"embed_tokens.weight",
                                       "norm.weight",
                                       "self_conditioning.pre_norm.weight",
                                       "self_conditioning.gate_proj.weight",
                                       "self_conditioning.up_proj.weight",
                                       "self_conditioning.down_proj.weight"};

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// "N.rest" after `prefix` -> rest, when N is a decimal layer index; "" otherwise.
std::string layer_suffix(const std::string& name, const char* prefix) {
  if (!starts_with(name, prefix)) return {};
  size_t i = std::char_traits<char>::length(prefix);
  const size_t digits = i;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
  if (i == digits || i >= name.size() || name[i] != '.') return {};
  return name.substr(i + 1);
}

Shape layer_shape(const ModelConfig& c, const LayerSpec& l, const std::string& suffix) {
  const int64_t H = c.hidden, D = l.head_dim, q = int64_t{c.n_heads} * D, kv = int64_t{l.n_kv_heads} * D;
  const int64_t I = c.intermediate, E = c.n_experts, F = c.expert_ff;
  if (suffix == "self_attn.q_proj.weight") return {q, H};
  if (suffix == "self_attn.k_proj.weight" || suffix == "self_attn.v_proj.weight") return {kv, H};
  if (suffix == "self_attn.o_proj.weight") return {H, q};
  if (suffix == "self_attn.q_norm.weight" || suffix == "self_attn.k_norm.weight") return {D};
  if (suffix == "mlp.gate_proj.weight" || suffix == "mlp.up_proj.weight") return {I, H};
  if (suffix == "mlp.down_proj.weight") return {H, I};
  if (suffix == "router.proj.weight") return {E, H};
  if (suffix == "router.per_expert_scale") return {E};
  if (suffix == "experts.gate_up_proj") return {E, 2 * F, H};
  if (suffix == "experts.down_proj") return {E, H, F};
  if (suffix == "layer_scalar") return {1};
  return {H};  // router.scale and the seven residual-stream norms
}

// Binds one expected tensor: present, floating dtype (or a packed format where the weight class allows one),
// exact shape.
Tensor bind_one(const TensorStore& store, const std::string& name, const Shape& shape) {
  if (!store.has(name))
    fail("checkpoint '{}' is missing tensor '{}' (expected shape {})", store.source(), name, shape.str());
  const TensorInfo& t = store.info(name);
  if (dtype_is_packed(t.dtype)) {
    const WeightClass cls = weight_class(name);
    if (weight_class_locked(cls))
      fail("tensor '{}' in '{}' is packed as {}, but {} weights must stay BF16, F16 or F32", name, t.file,
           dtype_name(t.dtype), weight_class_name(cls));
  } else if (t.dtype != DType::kBF16 && t.dtype != DType::kF16 && t.dtype != DType::kF32) {
    fail("tensor '{}' in '{}' has dtype {}; weights must be BF16, F16 or F32", name, t.file, dtype_name(t.dtype));
  }
  if (!(t.shape == shape))
    fail("tensor '{}' in '{}' has shape {}, but config.json implies {}", name, t.file, t.shape.str(), shape.str());
  return store.view(name);
}

// layer_scalar buffers are [1]; a rank-0 scalar is accepted too.
float read_scalar(const TensorStore& store, const std::string& name) {
  const bool rank0 = store.has(name) && store.info(name).shape.rank == 0;
  const Tensor t = bind_one(store, name, rank0 ? Shape{} : Shape{1});
  const float v = load_f32(t.data, t.dtype, 0);
  if (!std::isfinite(v)) fail("tensor '{}' in '{}' is not finite ({})", name, store.info(name).file, v);
  return v;
}

}  // namespace

std::vector<WeightEntry> expected_weights(const ModelConfig& cfg) {
  const int64_t H = cfg.hidden, I = cfg.intermediate;
  std::vector<WeightEntry> out;
  out.push_back({"model.decoder.embed_tokens.weight", Shape{cfg.vocab, H}});
  for (size_t i = 0; i < cfg.layers.size(); ++i) {
    const LayerSpec& l = cfg.layers[i];
    for (const char* suffix : kLayerSuffixes) {
      if (!l.sliding && std::string_view(suffix) == "self_attn.v_proj.weight") continue;  // K = V on full layers
      out.push_back({fmt::format("{}{}.{}", kDecoderLayers, i, suffix), layer_shape(cfg, l, suffix)});
    }
  }
  out.push_back({"model.decoder.norm.weight", Shape{H}});
  out.push_back({"model.decoder.self_conditioning.pre_norm.weight", Shape{H}});
  out.push_back({"model.decoder.self_conditioning.gate_proj.weight", Shape{I, H}});
  out.push_back({"model.decoder.self_conditioning.up_proj.weight", Shape{I, H}});
  out.push_back({"model.decoder.self_conditioning.down_proj.weight", Shape{H, I}});
  for (size_t i = 0; i < cfg.layers.size(); ++i)
    out.push_back({fmt::format("{}{}.layer_scalar", kEncoderLayers, i), Shape{1}});
  return out;
}

TensorRole classify_tensor_name(const std::string& name) {
  if (starts_with(name, "model.encoder.vision_tower.") || starts_with(name, "model.encoder.embed_vision."))
    return TensorRole::kVision;
  if (name == "lm_head.weight") return TensorRole::kIgnoredCopy;
  if (starts_with(name, kEncoderText))
    return layer_suffix(name, kEncoderLayers) == "layer_scalar" ? TensorRole::kText : TensorRole::kIgnoredCopy;
  if (starts_with(name, kDecoderLayers)) {
    const std::string suffix = layer_suffix(name, kDecoderLayers);
    for (const char* s : kLayerSuffixes)
      if (suffix == s) return TensorRole::kText;
    return TensorRole::kUnknown;
  }
  if (starts_with(name, kDecoder)) {
    const std::string rest = name.substr(std::char_traits<char>::length(kDecoder));
    for (const char* s : kDecoderTop)
      if (rest == s) return TensorRole::kText;
  }
  return TensorRole::kUnknown;
}

ModelWeights assemble_weights(const ModelConfig& cfg, const std::function<Tensor(const std::string&)>& take) {
  ModelWeights w;
  w.embed = take("model.decoder.embed_tokens.weight");
  w.dtype = w.embed.dtype;
  w.final_norm = take("model.decoder.norm.weight");
  w.sc_pre_norm = take("model.decoder.self_conditioning.pre_norm.weight");
  w.sc_gate = take("model.decoder.self_conditioning.gate_proj.weight");
  w.sc_up = take("model.decoder.self_conditioning.up_proj.weight");
  w.sc_down = take("model.decoder.self_conditioning.down_proj.weight");
  w.layers.resize(cfg.layers.size());
  for (size_t i = 0; i < cfg.layers.size(); ++i) {
    LayerWeights& L = w.layers[i];
    const std::string p = fmt::format("{}{}.", kDecoderLayers, i);
    L.q = take(p + "self_attn.q_proj.weight");
    L.k = take(p + "self_attn.k_proj.weight");
    if (cfg.layers[i].sliding) L.v = take(p + "self_attn.v_proj.weight");
    L.o = take(p + "self_attn.o_proj.weight");
    L.q_norm = take(p + "self_attn.q_norm.weight");
    L.k_norm = take(p + "self_attn.k_norm.weight");
    L.gate = take(p + "mlp.gate_proj.weight");
    L.up = take(p + "mlp.up_proj.weight");
    L.down = take(p + "mlp.down_proj.weight");
    L.router_proj = take(p + "router.proj.weight");
    L.router_scale = take(p + "router.scale");
    L.per_expert_scale = take(p + "router.per_expert_scale");
    L.experts_gate_up = take(p + "experts.gate_up_proj");
    L.experts_down = take(p + "experts.down_proj");
    L.input_norm = take(p + "input_layernorm.weight");
    L.post_attn_norm = take(p + "post_attention_layernorm.weight");
    L.pre_ff_norm = take(p + "pre_feedforward_layernorm.weight");
    L.post_ff_norm = take(p + "post_feedforward_layernorm.weight");
    L.post_ff_norm_1 = take(p + "post_feedforward_layernorm_1.weight");
    L.post_ff_norm_2 = take(p + "post_feedforward_layernorm_2.weight");
    L.pre_ff_norm_2 = take(p + "pre_feedforward_layernorm_2.weight");
  }
  return w;
}

ModelWeights bind_weights(const ModelConfig& cfg, const TensorStore& store) {
  const std::vector<WeightEntry> expected = expected_weights(cfg);
  std::map<std::string, Tensor> bound;
  for (const WeightEntry& e : expected) {
    if (e.name.size() >= 12 && e.name.compare(e.name.size() - 12, 12, "layer_scalar") == 0) continue;  // read below
    bound.emplace(e.name, bind_one(store, e.name, e.shape));
  }

  ModelWeights w = assemble_weights(cfg, [&](const std::string& name) { return bound.at(name); });
  for (size_t i = 0; i < cfg.layers.size(); ++i) {
    w.layers[i].decoder_scalar = read_scalar(store, fmt::format("{}{}.layer_scalar", kDecoderLayers, i));
    w.layers[i].encoder_scalar = read_scalar(store, fmt::format("{}{}.layer_scalar", kEncoderLayers, i));
  }

  // Names that are neither expected, nor vision, nor a tolerated copy: reported once, then ignored.
  std::set<std::string> wanted;
  for (const WeightEntry& e : expected) wanted.insert(e.name);
  std::vector<std::string> unknown;
  for (const std::string& name : store.names()) {
    const TensorRole role = classify_tensor_name(name);
    if (role == TensorRole::kVision || role == TensorRole::kIgnoredCopy) continue;
    if (wanted.count(name) == 0) unknown.push_back(name);
  }
  if (!unknown.empty()) {
    std::string list;
    for (size_t i = 0; i < unknown.size() && i < 5; ++i) list += fmt::format("{}'{}'", i ? ", " : "", unknown[i]);
    fmt::print(stderr, "warning: checkpoint '{}' has {} unrecognised tensor(s), ignored: {}{}\n", store.source(),
               unknown.size(), list, unknown.size() > 5 ? ", ..." : "");
  }
  return w;
}

void set_expert_act(ModelWeights& w, const std::string& mode) {
  DG_CHECK(mode == "auto" || mode == "bf16" || mode == "fp8", "unknown expert activation '{}': expected auto, bf16 "
           "or fp8", mode);
  for (size_t l = 0; l < w.layers.size(); ++l) {
    LayerWeights& L = w.layers[l];
    const bool fp8 = L.experts_gate_up.dtype == DType::kFp8 && L.experts_down.dtype == DType::kFp8;
    DG_CHECK(mode != "fp8" || fp8, "--expert-act fp8 needs fp8 experts, and layer {} stores them as {} / {} "
             "(quantize with the fp8 profile, or use --expert-act auto)", l, dtype_name(L.experts_gate_up.dtype),
             dtype_name(L.experts_down.dtype));
    L.experts_act = (mode == "fp8" || (mode == "auto" && fp8)) ? DType::kFp8 : DType::kBF16;
  }
}

ParamCounts count_params(const ModelConfig& cfg) {
  ParamCounts p;
  const int64_t H = cfg.hidden, I = cfg.intermediate, E = cfg.n_experts, F = cfg.expert_ff;
  p.embed = int64_t{cfg.vocab} * H;
  for (const LayerSpec& l : cfg.layers) {
    const int64_t q = int64_t{cfg.n_heads} * l.head_dim, kv = int64_t{l.n_kv_heads} * l.head_dim;
    p.attention += (q + kv + (l.sliding ? kv : 0)) * H + H * q;
    p.dense_mlp += 3 * I * H;
    p.router += E * H + H + E;
    p.experts += E * 2 * F * H + E * H * F;
    p.norms += 7 * H + 2 * int64_t{l.head_dim};
  }
  p.norms += H;                 // final norm
  p.self_cond = H + 3 * I * H;  // pre_norm + gate/up/down
  return p;                     // layer_scalar buffers are not parameters
}

}  // namespace dg
