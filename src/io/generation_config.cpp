#include "io/generation_config.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/json_fields.h"

namespace dg {

using nlohmann::json;

namespace {

constexpr int64_t kMaxCount = 0x7fffffff;

// Reads `key` from the flat spelling, else from the legacy nested object `nested` (if present).
std::optional<double> num_either(const JsonFields& root, const std::optional<JsonFields>& nested, const char* key) {
  if (auto v = root.opt_num(key)) return v;
  if (nested) return nested->opt_num(key);
  return std::nullopt;
}

std::optional<int64_t> int_either(const JsonFields& root, const std::optional<JsonFields>& nested, const char* key) {
  if (auto v = root.opt_int(key, 0, kMaxCount)) return v;
  if (nested) return nested->opt_int(key, 0, kMaxCount);
  return std::nullopt;
}

}  // namespace

GenerationConfig parse_generation_config(const std::string& json_text, const std::string& source) {
  const json root_json = json_parse(json_text, source);
  const JsonFields root(root_json, source, "");
  GenerationConfig g;

  if (auto v = root.opt_int("max_new_tokens", 1, kMaxCount)) g.max_new_tokens = static_cast<int>(*v);
  if (auto v = root.opt_int("max_denoising_steps", 1, kMaxCount)) g.max_denoising_steps = static_cast<int>(*v);

  if (root.has("sampler_config")) {
    const JsonFields s = root.sub("sampler_config");
    const std::string cls = s.opt_str("_cls_name").value_or("EntropyBoundSamplerConfig");
    if (cls != "EntropyBoundSamplerConfig")
      s.fail_field("_cls_name", fmt::format("= '{}' is not supported (expected EntropyBoundSamplerConfig)", cls));
    g.entropy_bound = s.opt_num("entropy_bound").value_or(g.entropy_bound);
  }

  // Legacy nested spellings (mlx-vlm): the flat key wins when both are given.
  std::optional<JsonFields> sched, stop;
  if (root.has("linear_temperature_schedule_config")) sched.emplace(root.sub("linear_temperature_schedule_config"));
  if (root.has("diffusion_stopping_config")) stop.emplace(root.sub("diffusion_stopping_config"));
  g.t_min = num_either(root, sched, "t_min").value_or(g.t_min);
  g.t_max = num_either(root, sched, "t_max").value_or(g.t_max);
  g.confidence_threshold = num_either(root, stop, "confidence_threshold").value_or(g.confidence_threshold);
  if (auto v = int_either(root, stop, "stability_threshold")) g.stability_threshold = static_cast<int>(*v);

  if (const json* eos = root.get("eos_token_id")) {
    const std::string what = "field 'eos_token_id'";
    if (eos->is_array()) {
      for (const json& e : *eos) g.eos_ids.push_back(static_cast<int>(json_int(e, 0, kMaxCount, source, what)));
    } else {
      g.eos_ids.push_back(static_cast<int>(json_int(*eos, 0, kMaxCount, source, what)));
    }
  }
  if (auto v = root.opt_int("pad_token_id", 0, kMaxCount)) g.pad_id = static_cast<int>(*v);
  if (auto v = root.opt_int("bos_token_id", 0, kMaxCount)) g.bos_id = static_cast<int>(*v);

  if (!(g.entropy_bound > 0)) fail("{}: sampler_config.entropy_bound must be > 0, got {}", source, g.entropy_bound);
  if (!(g.t_min >= 0)) fail("{}: t_min must be >= 0, got {}", source, g.t_min);
  if (!(g.t_max > g.t_min)) fail("{}: t_max ({}) must be greater than t_min ({})", source, g.t_max, g.t_min);
  if (!(g.confidence_threshold > 0))
    fail("{}: confidence_threshold must be > 0, got {}", source, g.confidence_threshold);
  return g;
}

GenerationConfig load_generation_config(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return GenerationConfig{};
  return parse_generation_config(read_text_file(path), path);
}

}  // namespace dg
