#include "diffusion/options.h"

#include "core/error.h"
#include "diffusion/json_schema.h"
#include "diffusion/sampler_settings.h"

namespace dg {

SamplerProfile sampler_profile_from_name(const std::string& name) {
  if (name == "contract") return SamplerProfile::kContract;
  if (name == "reference") return SamplerProfile::kReference;
  fail("unknown sampler profile '{}': expected 'contract' or 'reference'", name);
}

const char* sampler_profile_name(SamplerProfile p) {
  return p == SamplerProfile::kContract ? "contract" : "reference";
}

void SamplerOptions::validate() const {
  for (const SamplerSetting& s : kSamplerSettings)
    std::visit(
        [&](auto m) {
          DG_CHECK(setting_in_range(s, static_cast<double>(this->*m)), "{} must be {} (got {})", s.name,
                   setting_range_text(s), this->*m);
        },
        s.member);
  DG_CHECK(t_max > t_min, "temperature schedule needs t_max > t_min >= 0 (got {} .. {})", t_min, t_max);
  DG_CHECK(json_schema == nullptr || json != nullptr, "a JSON schema constrains JSON mode, which is off");
  DG_CHECK(json == nullptr || tool_calls == nullptr,
           "JSON mode and strict tool calls exclude each other: the answer is one JSON object, a call is not");
  // Every token is at least one byte: a budget below the shortest valid object could end before it closes.
  DG_CHECK(json_schema == nullptr || max_new_tokens >= json_schema->node(0).min_bytes,
           "max_new_tokens {} is below the shortest object the JSON schema allows ({} bytes): the answer could not "
           "always close", max_new_tokens, json_schema->node(0).min_bytes);
}

SamplerOptions make_sampler_options(SamplerProfile profile, const GenerationConfig& gen, int32_t pad_id,
                                    int32_t bos_id) {
  SamplerOptions o;
  o.profile = profile;
  o.max_new_tokens = gen.max_new_tokens;
  o.steps = gen.max_denoising_steps;
  o.entropy_bound = gen.entropy_bound;
  o.t_min = gen.t_min;
  o.t_max = gen.t_max;
  o.stability_threshold = gen.stability_threshold;
  o.confidence_threshold = gen.confidence_threshold;
  o.stop_ids.assign(gen.eos_ids.begin(), gen.eos_ids.end());
  o.pad_id = gen.pad_id >= 0 ? gen.pad_id : pad_id;
  o.bos_id = gen.bos_id >= 0 ? gen.bos_id : bos_id;
  if (profile == SamplerProfile::kReference)
    for (const SamplerSetting& s : kSamplerSettings)
      if (s.reference) setting_assign(s, o, *s.reference);
  return o;
}

SamplerOptions fixed_step_options(int steps, int max_new_tokens) {
  SamplerOptions so;
  so.profile = SamplerProfile::kContract;
  so.max_new_tokens = max_new_tokens;
  so.steps = steps;
  so.confidence_threshold = 1e-30;
  so.plateau_steps = 0;
  so.entropy_stop = 0;
  so.empty_reply_retries = 0;
  so.commit_trim_tau = 0;
  so.sc_sparse_cutoff = 0;
  so.stop_ids = {};
  return so;
}

}  // namespace dg
