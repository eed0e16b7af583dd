#include "io/model_config.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "io/json_fields.h"

namespace dg {

using nlohmann::json;

namespace {

// Upper bounds that keep every shape product (E * 2ff * H, V * H) far inside int64.
constexpr int64_t kMaxDim = int64_t{1} << 20;
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxId = 0x7fffffff;

constexpr const char* kSliding = "sliding_attention";
constexpr const char* kFull = "full_attention";

// Values a per_layer_config entry may override.
struct Override {
  std::optional<int64_t> head_dim, n_kv_heads, n_heads;
  bool given = false;
};

Override parse_override(const json& v, const std::string& source, const std::string& key) {
  Override o;
  if (v.is_null()) return o;
  JsonFields f(v, source, "text_config.per_layer_config." + key + ".");
  o.given = true;
  o.head_dim = f.opt_int("head_dim", 1, kMaxDim);
  o.n_kv_heads = f.opt_int("num_key_value_heads", 1, kMaxDim);
  o.n_heads = f.opt_int("num_attention_heads", 1, kMaxDim);
  return o;
}

// A per_layer_config key: a decimal layer index ("5", also zero-padded "05"), or -1 when it is not one.
int64_t layer_index_key(const std::string& key) {
  if (key.empty() || key.size() > 9) return -1;
  int64_t v = 0;
  for (char c : key) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

RopeParams default_rope(bool sliding) {
  RopeParams r;
  if (sliding) return r;  // default, theta 1e4
  r.type = "proportional";
  r.theta = 1e6;
  r.partial_rotary_factor = 0.25;
  return r;
}

// One rope_parameters entry. An explicit entry replaces the type's default dict, as in the reference:
// missing keys take the rope function's own defaults (rope_type default, partial_rotary_factor 1, factor 1).
RopeParams parse_rope(const JsonFields& f, double fallback_theta, const char* layer_type) {
  RopeParams r;
  r.type = f.opt_str("rope_type").value_or(f.opt_str("type").value_or("default"));
  if (r.type != "default" && r.type != "proportional")
    f.fail_field("rope_type", fmt::format("= '{}' is not supported for {} layers (expected 'default' or "
                                          "'proportional')",
                                          r.type, layer_type));
  r.theta = f.opt_num("rope_theta").value_or(fallback_theta);
  if (!(r.theta > 0)) f.fail_field("rope_theta", "must be > 0");
  if (r.type == "proportional") {
    r.partial_rotary_factor = f.opt_num("partial_rotary_factor").value_or(1.0);
    if (!(r.partial_rotary_factor > 0 && r.partial_rotary_factor <= 1))
      f.fail_field("partial_rotary_factor", "must be in (0, 1]");
    r.factor = f.opt_num("factor").value_or(1.0);
    if (!(r.factor > 0)) f.fail_field("factor", "must be > 0");
  }
  return r;  // the default rope type has no factor: the reference ignores it there
}

void resolve_rope(const JsonFields& text, RopeParams* sliding, RopeParams* full) {
  *sliding = default_rope(true);
  *full = default_rope(false);
  if (auto legacy = text.opt_num("rope_theta")) sliding->theta = *legacy;  // pre-rope_parameters spelling
  if (!text.has("rope_parameters")) return;
  const JsonFields rp = text.sub("rope_parameters");
  if (rp.has(kSliding) || rp.has(kFull)) {
    if (rp.has(kSliding)) *sliding = parse_rope(rp.sub(kSliding), sliding->theta, kSliding);
    if (rp.has(kFull)) *full = parse_rope(rp.sub(kFull), full->theta, kFull);
  } else if (rp.has("rope_type") || rp.has("rope_theta")) {  // one flat dict for every layer
    *sliding = parse_rope(rp, sliding->theta, kSliding);
    *full = parse_rope(rp, full->theta, kFull);
  }
}

std::vector<bool> resolve_layer_types(const JsonFields& text, int n_layers) {
  std::vector<bool> sliding(static_cast<size_t>(n_layers));
  const json* lt = text.get("layer_types");
  if (lt == nullptr) {
    for (int i = 0; i < n_layers; ++i) sliding[static_cast<size_t>(i)] = (i + 1) % 6 != 0;
  } else {
    if (!lt->is_array() || lt->size() != static_cast<size_t>(n_layers))
      text.fail_field("layer_types", fmt::format("must be a list of {} layer types (num_hidden_layers)", n_layers));
    for (size_t i = 0; i < lt->size(); ++i) {
      const json& v = (*lt)[i];
      if (v.is_string() && v.get<std::string>() == kSliding) {
        sliding[i] = true;
      } else if (v.is_string() && v.get<std::string>() == kFull) {
        sliding[i] = false;
      } else {
        text.fail_field("layer_types",
                        fmt::format("entry {} is {}; expected \"{}\" or \"{}\"", i, v.dump(), kSliding, kFull));
      }
    }
    if (sliding.back())
      fmt::print(stderr, "warning: {}: the last layer must be full_attention; treating layer {} as full_attention\n",
                 text.source(), n_layers - 1);
  }
  sliding.back() = false;  // the reference forces the last layer to full attention
  return sliding;
}

void resolve_heads(const JsonFields& text, ModelConfig& cfg, const std::vector<bool>& sliding) {
  const std::string& src = text.source();
  const size_t n = static_cast<size_t>(cfg.n_layers);
  std::vector<Override> by_layer(n);
  Override by_type[2];  // [0] full, [1] sliding
  const json* plc = text.get("per_layer_config");
  if (plc != nullptr && plc->is_object()) {
    for (const auto& [key, val] : plc->items()) {
      if (key == kSliding || key == kFull) {
        by_type[key == kSliding ? 1 : 0] = parse_override(val, src, key);
        continue;
      }
      const int64_t idx = layer_index_key(key);
      if (idx < 0)
        text.fail_field("per_layer_config",
                        fmt::format("has key '{}', which is neither a layer index nor a layer type", key));
      if (idx >= cfg.n_layers)
        text.fail_field("per_layer_config",
                        fmt::format("names layer '{}' but there are only {} layers", key, cfg.n_layers));
      Override& o = by_layer[static_cast<size_t>(idx)];
      if (o.given) text.fail_field("per_layer_config", fmt::format("gives layer {} twice", idx));
      o = parse_override(val, src, key);
    }
  } else if (plc != nullptr && plc->is_array()) {
    if (plc->size() != n) text.fail_field("per_layer_config", fmt::format("must list {} layers", n));
    for (size_t i = 0; i < n; ++i) by_layer[i] = parse_override((*plc)[i], src, std::to_string(i));
  } else if (plc != nullptr) {
    text.fail_field("per_layer_config", "must be an object keyed by layer index");
  }

  const auto base_dim = text.opt_int("head_dim", 1, kMaxDim);
  const auto base_kv = text.opt_int("num_key_value_heads", 1, kMaxDim);
  // Legacy spelling, read only without per_layer_config: full layers default to 512-dim heads even when the
  // key is absent (the reference's constructor default); KV heads fall back to the base value.
  std::optional<int64_t> global_dim, global_kv;
  if (plc == nullptr) {
    global_dim = text.opt_int("global_head_dim", 1, kMaxDim).value_or(512);
    global_kv = text.opt_int("num_global_key_value_heads", 1, kMaxDim);
  }

  cfg.layers.resize(n);
  for (size_t i = 0; i < n; ++i) {
    LayerSpec& l = cfg.layers[i];
    l.sliding = sliding[i];
    const Override& o = by_layer[i];
    const Override& t = by_type[l.sliding ? 1 : 0];
    auto dim = o.head_dim ? o.head_dim : t.head_dim ? t.head_dim : (!l.sliding && global_dim) ? global_dim : base_dim;
    auto kv = o.n_kv_heads                ? o.n_kv_heads
              : t.n_kv_heads              ? t.n_kv_heads
              : (!l.sliding && global_kv) ? global_kv
                                          : base_kv;
    if (!dim)
      fail("{}: missing required field 'text_config.head_dim' (layer {} has no per_layer_config override)", src, i);
    if (!kv)
      fail("{}: missing required field 'text_config.num_key_value_heads' (layer {} has no per_layer_config override)",
           src, i);
    auto nh = o.n_heads ? o.n_heads : t.n_heads;
    if (nh && *nh != cfg.n_heads)
      fail(
          "{}: per_layer_config sets num_attention_heads = {} for layer {}, but per-layer query head counts other "
          "than text_config.num_attention_heads ({}) are not supported",
          src, *nh, i, cfg.n_heads);
    l.head_dim = static_cast<int>(*dim);
    l.n_kv_heads = static_cast<int>(*kv);
    if (l.head_dim % 2 != 0) fail("{}: layer {} head_dim {} must be even (RoPE rotates pairs)", src, i, l.head_dim);
    if (cfg.n_heads % l.n_kv_heads != 0)
      fail("{}: num_attention_heads {} is not divisible by layer {}'s num_key_value_heads {}", src, cfg.n_heads, i,
           l.n_kv_heads);
  }
}

int first_id(const JsonFields& f, const char* key, int fallback) {
  const json* v = f.get(key);
  if (v == nullptr) return fallback;
  const std::string what = fmt::format("field '{}'", f.path(key));
  if (v->is_array()) return v->empty() ? fallback : static_cast<int>(json_int((*v)[0], 0, kMaxId, f.source(), what));
  return static_cast<int>(json_int(*v, 0, kMaxId, f.source(), what));
}

}  // namespace

ModelConfig parse_model_config(const std::string& json_text, const std::string& source) {
  const json root_json = json_parse(json_text, source);
  const JsonFields root(root_json, source, "");
  const JsonFields text = root.sub("text_config");
  ModelConfig cfg;

  cfg.canvas = static_cast<int>(root.opt_int("canvas_length", 1, kMaxDim).value_or(256));
  cfg.image_token_id = static_cast<int>(root.opt_int("image_token_id", 0, kMaxId).value_or(258880));
  const auto tie =
      root.has("tie_word_embeddings") ? root.opt_bool("tie_word_embeddings") : text.opt_bool("tie_word_embeddings");
  cfg.tie_word_embeddings = tie.value_or(true);
  if (!cfg.tie_word_embeddings)
    fail(
        "{}: tie_word_embeddings is false; untied checkpoints (separate lm_head and encoder weights) are not "
        "supported — DiffusionGemma shares one embedding/lm_head and one set of encoder/decoder weights",
        source);

  cfg.vocab = static_cast<int>(text.req_int("vocab_size", 1, kMaxVocab));
  cfg.hidden = static_cast<int>(text.req_int("hidden_size", 1, kMaxDim));
  cfg.intermediate = static_cast<int>(text.req_int("intermediate_size", 1, kMaxDim));
  cfg.expert_ff = static_cast<int>(text.req_int("moe_intermediate_size", 1, kMaxDim));
  cfg.n_layers = static_cast<int>(text.req_int("num_hidden_layers", 1, kMaxLayers));
  cfg.n_heads = static_cast<int>(text.req_int("num_attention_heads", 1, kMaxDim));
  cfg.n_experts = static_cast<int>(text.req_int("num_experts", 1, kMaxDim));
  cfg.top_k = static_cast<int>(text.req_int("top_k_experts", 1, kMaxDim));
  cfg.window = static_cast<int>(text.req_int("sliding_window", 1, kMaxVocab));
  if (cfg.top_k > cfg.n_experts)
    fail("{}: text_config.top_k_experts {} exceeds num_experts {}", source, cfg.top_k, cfg.n_experts);

  cfg.rms_eps = text.opt_num("rms_norm_eps").value_or(1e-6);
  if (!(cfg.rms_eps > 0)) text.fail_field("rms_norm_eps", "must be > 0");
  // JSON null disables softcapping in the reference ("is not None" test); 0 encodes that here.
  cfg.softcap = text.is_null("final_logit_softcapping") ? 0.0 : text.opt_num("final_logit_softcapping").value_or(30.0);
  if (cfg.softcap < 0) text.fail_field("final_logit_softcapping", "must be >= 0");

  cfg.pad_id = first_id(text, "pad_token_id", 0);
  cfg.bos_id = first_id(text, "bos_token_id", 2);
  cfg.eos_id = first_id(text, "eos_token_id", 1);
  cfg.eos_ids = {cfg.eos_id};
  if (const json* eos = text.get("eos_token_id"); eos != nullptr && eos->is_array() && eos->size() > 1)
    for (size_t i = 1; i < eos->size(); ++i) {
      const int id = static_cast<int>(json_int((*eos)[i], 0, kMaxId, source, "field 'text_config.eos_token_id'"));
      if (id >= cfg.vocab) fail("{}: text_config.eos_token_id {} is outside the vocabulary ({})", source, id, cfg.vocab);
      cfg.eos_ids.push_back(id);
    }
  cfg.max_positions = text.opt_int("max_position_embeddings", 1, int64_t{1} << 40).value_or(0);
  const std::pair<const char*, int> ids[] = {
      {"pad_token_id", cfg.pad_id}, {"bos_token_id", cfg.bos_id}, {"eos_token_id", cfg.eos_id}};
  for (const auto& [name, id] : ids)
    if (id >= cfg.vocab) fail("{}: text_config.{} {} is outside the vocabulary ({})", source, name, id, cfg.vocab);

  const std::string act = text.opt_str("hidden_activation").value_or("gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh")
    text.fail_field("hidden_activation", fmt::format("= '{}' is not supported (expected gelu_pytorch_tanh)", act));
  if (text.opt_bool("attention_bias").value_or(false))
    text.fail_field("attention_bias", "is true; attention projections with biases are not supported");
  if (const json* bidi = text.get("use_bidirectional_attention")) {
    if (!bidi->is_string() || (bidi->get<std::string>() != "vision" && bidi->get<std::string>() != "all"))
      text.fail_field("use_bidirectional_attention",
                      fmt::format("= {} is not recognised (expected \"vision\")", bidi->dump()));
    if (bidi->get<std::string>() == "all")
      text.fail_field("use_bidirectional_attention",
                      "= \"all\" (bidirectional text encoder, sliding window W//2+1) is not supported; this engine "
                      "implements the causal text encoder of use_bidirectional_attention = \"vision\"");
  }

  const std::vector<bool> sliding = resolve_layer_types(text, cfg.n_layers);
  resolve_heads(text, cfg, sliding);
  RopeParams rope_sliding, rope_full;
  resolve_rope(text, &rope_sliding, &rope_full);
  for (LayerSpec& l : cfg.layers) l.rope = l.sliding ? rope_sliding : rope_full;
  return cfg;
}

ModelConfig load_model_config(const std::string& path) { return parse_model_config(read_text_file(path), path); }

int ModelConfig::n_full_layers() const {
  int n = 0;
  for (const LayerSpec& l : layers) n += l.sliding ? 0 : 1;
  return n;
}

std::vector<float> ModelConfig::rope_inv_freq(int l) const {
  DG_CHECK(l >= 0 && l < static_cast<int>(layers.size()), "rope_inv_freq: layer {} out of range [0, {})", l,
           layers.size());
  const LayerSpec& s = layers[static_cast<size_t>(l)];
  const int half = s.head_dim / 2;
  // Proportional: only the first R = int(p * D // 2) frequencies rotate; the rest are zero.
  int rotated = half;
  if (s.rope.type == "proportional")
    rotated = static_cast<int>(std::floor(s.rope.partial_rotary_factor * s.head_dim / 2.0));
  std::vector<float> inv(static_cast<size_t>(half), 0.0f);
  const float theta = static_cast<float>(s.rope.theta);
  for (int i = 0; i < half && i < rotated; ++i)
    inv[static_cast<size_t>(i)] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(s.head_dim));
  if (s.rope.type == "proportional" && s.rope.factor != 1.0)
    for (float& f : inv) f /= static_cast<float>(s.rope.factor);
  return inv;
}

}  // namespace dg
