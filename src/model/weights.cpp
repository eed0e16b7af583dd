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

bool has_prefix(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// "N.rest" after `prefix` -> rest, when N is a decimal layer index; "" otherwise.
std::string layer_suffix(const std::string& name, const char* prefix) {
  if (!has_prefix(name, prefix)) return {};
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
  if (has_prefix(name, "model.encoder.vision_tower.") || has_prefix(name, "model.encoder.embed_vision."))
    return TensorRole::kVision;
  if (name == "lm_head.weight") return TensorRole::kIgnoredCopy;
  if (has_prefix(name, kEncoderText))
    return layer_suffix(name, kEncoderLayers) == "layer_scalar" ? TensorRole::kText : TensorRole::kIgnoredCopy;
  if (has_prefix(name, kDecoderLayers)) {
    const std::string suffix = layer_suffix(name, kDecoderLayers);
    for (const char* s : kLayerSuffixes)
      if (suffix == s) return TensorRole::kText;
    return TensorRole::kUnknown;
  }
  if (has_prefix(name, kDecoder)) {
    const std::string rest = name.substr(std::char_traits<char>::length(kDecoder));
    for (const char* s : kDecoderTop)
      if (rest == s) return TensorRole::kText;
  }
  return TensorRole::kUnknown;
}

using Use = WeightUse;
const WeightField<LayerWeights> kLayerWeightFields[21] = {
    {&LayerWeights::q, "self_attn.q_proj.weight", "attention q", Use::kLinear},
    {&LayerWeights::k, "self_attn.k_proj.weight", "attention k", Use::kLinear},
    {&LayerWeights::v, "self_attn.v_proj.weight", "attention v", Use::kLinear},
    {&LayerWeights::o, "self_attn.o_proj.weight", "attention o", Use::kLinear},
    {&LayerWeights::q_norm, "self_attn.q_norm.weight", "q_norm", Use::kPlain},
    {&LayerWeights::k_norm, "self_attn.k_norm.weight", "k_norm", Use::kPlain},
    {&LayerWeights::gate, "mlp.gate_proj.weight", "dense MLP gate", Use::kLinear},
    {&LayerWeights::up, "mlp.up_proj.weight", "dense MLP up", Use::kLinear},
    {&LayerWeights::down, "mlp.down_proj.weight", "dense MLP down", Use::kLinear},
    {&LayerWeights::router_proj, "router.proj.weight", "router.proj", Use::kPlain},
    {&LayerWeights::router_scale, "router.scale", "router.scale", Use::kPlain},
    {&LayerWeights::per_expert_scale, "router.per_expert_scale", "router.per_expert_scale", Use::kPlain},
    {&LayerWeights::experts_gate_up, "experts.gate_up_proj", "experts.gate_up", Use::kExperts},
    {&LayerWeights::experts_down, "experts.down_proj", "experts.down", Use::kExperts},
    {&LayerWeights::input_norm, "input_layernorm.weight", "input_layernorm", Use::kPlain},
    {&LayerWeights::post_attn_norm, "post_attention_layernorm.weight", "post_attention_layernorm", Use::kPlain},
    {&LayerWeights::pre_ff_norm, "pre_feedforward_layernorm.weight", "pre_feedforward_layernorm", Use::kPlain},
    {&LayerWeights::post_ff_norm, "post_feedforward_layernorm.weight", "post_feedforward_layernorm", Use::kPlain},
    {&LayerWeights::post_ff_norm_1, "post_feedforward_layernorm_1.weight", "post_feedforward_layernorm_1",
     Use::kPlain},
    {&LayerWeights::post_ff_norm_2, "post_feedforward_layernorm_2.weight", "post_feedforward_layernorm_2",
     Use::kPlain},
    {&LayerWeights::pre_ff_norm_2, "pre_feedforward_layernorm_2.weight", "pre_feedforward_layernorm_2",
     Use::kPlain},
};

const WeightField<ModelWeights> kModelWeightFields[6] = {
    {&ModelWeights::embed, "embed_tokens.weight", "the embedding", Use::kPlain},
    {&ModelWeights::final_norm, "norm.weight", "the final norm", Use::kPlain},
    {&ModelWeights::sc_pre_norm, "self_conditioning.pre_norm.weight", "the self-conditioning pre_norm", Use::kPlain},
    {&ModelWeights::sc_gate, "self_conditioning.gate_proj.weight", "the self-conditioning MLP (sc_gate)",
     Use::kLinear},
    {&ModelWeights::sc_up, "self_conditioning.up_proj.weight", "the self-conditioning MLP (sc_up)", Use::kLinear},
    {&ModelWeights::sc_down, "self_conditioning.down_proj.weight", "the self-conditioning MLP (sc_down)",
     Use::kLinear},
};

ModelWeights assemble_weights(const ModelConfig& cfg, const std::function<Tensor(const std::string&)>& take) {
  ModelWeights w;
  for (const auto& f : kModelWeightFields) w.*f.member = take(std::string(kDecoder) + f.checkpoint);
  w.dtype = w.embed.dtype;
  w.layers.resize(cfg.layers.size());
  for (size_t i = 0; i < cfg.layers.size(); ++i) {
    const std::string p = fmt::format("{}{}.", kDecoderLayers, i);
    for (const auto& f : kLayerWeightFields) {
      if (f.member == &LayerWeights::v && !cfg.layers[i].sliding) continue;  // full layers: V is the raw K
      w.layers[i].*f.member = take(p + f.checkpoint);
    }
  }
  return w;
}

size_t weight_bytes(const ModelWeights& w, int plain_bytes) {
  const auto bytes = [plain_bytes](const Tensor& t) {
    if (t.empty()) return size_t{0};
    if (dtype_is_packed(t.dtype) || plain_bytes == 0) return t.nbytes();
    return static_cast<size_t>(t.numel()) * static_cast<size_t>(plain_bytes);
  };
  size_t n = 0;
  for (const auto& f : kModelWeightFields) n += bytes(w.*f.member);
  for (const LayerWeights& l : w.layers)
    for (const auto& f : kLayerWeightFields) n += bytes(l.*f.member);
  return n;
}

void place_shared_inputs(ModelWeights& w, Backend& be) {
  Tensor* sc[] = {&w.sc_gate, &w.sc_up};
  be.place_side_by_side(sc);
  for (LayerWeights& L : w.layers) {
    Tensor* qkv[] = {&L.q, &L.k, &L.v};  // linears(): one product for the projections of a layer
    be.place_side_by_side(qkv);
    Tensor* gate_up[] = {&L.gate, &L.up};  // gated_linear(): one product and the gated GELU of its halves
    be.place_side_by_side(gate_up);
  }
}

ModelWeights upload_weights(const ModelWeights& host, Backend& be) {
  for (const auto& f : kModelWeightFields) be.check_weight(host.*f.member, f.use, f.what);
  for (size_t l = 0; l < host.layers.size(); ++l)
    for (const auto& f : kLayerWeightFields)
      be.check_weight(host.layers[l].*f.member, f.use, fmt::format("layer {} {}", l, f.what));
  ModelWeights d = host;
  auto up = [&](Tensor& t) {
    if (!t.empty()) t = be.upload(t);
  };
  for (const auto& f : kModelWeightFields) up(d.*f.member);
  for (LayerWeights& L : d.layers)
    for (const auto& f : kLayerWeightFields) up(L.*f.member);
  place_shared_inputs(d, be);
  be.synchronize();
  d.dtype = d.embed.dtype;
  return d;
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

bool linear_act_fp8(const std::string& mode) {
  DG_CHECK(mode == "auto" || mode == "bf16" || mode == "fp8", "unknown linear activation '{}': expected auto, bf16 "
           "or fp8", mode);
  return mode != "bf16";
}

VocabFp8 vocab_act_fp8(const std::string& mode) {
  DG_CHECK(mode == "bf16" || mode == "fp8" || mode == "fp8-lm-head", "unknown vocabulary activation '{}': expected "
           "bf16, fp8 or fp8-lm-head", mode);
  return {mode != "bf16", mode == "fp8"};
}

void set_vocab_act(ModelWeights& w, Backend& be, const std::string& mode) {
  const VocabFp8 v = vocab_act_fp8(mode);
  w.embed_fp8 = v.lm_head ? be.fp8_table(w.embed, false) : Tensor{};
  w.embed_fp8_t = v.soft_embed ? be.fp8_table(w.embed, true) : Tensor{};
}

void check_linear_act(const ModelWeights& w, const std::string& mode) {
  if (!linear_act_fp8(mode) || mode == "auto") return;
  bool any = w.sc_gate.dtype == DType::kFp8 || w.sc_up.dtype == DType::kFp8 || w.sc_down.dtype == DType::kFp8;
  for (const LayerWeights& L : w.layers)
    for (const Tensor* t : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) any = any || t->dtype == DType::kFp8;
  DG_CHECK(any, "--linear-act fp8 needs fp8 linears, and this model stores none (quantize with --profile fp8-all, "
           "or --set attn=fp8 / dense=fp8 / sc=fp8; or use --linear-act auto)");
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
