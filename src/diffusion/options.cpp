#include "diffusion/options.h"

#include "core/error.h"
#include "diffusion/json_schema.h"

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
  DG_CHECK(json_schema == nullptr || json != nullptr, "a JSON schema constrains JSON mode, which is off");
  // Every token is at least one byte: a budget below the shortest valid object could end before it closes.
  DG_CHECK(json_schema == nullptr || max_new_tokens >= json_schema->node(0).min_bytes,
           "max_new_tokens {} is below the shortest object the JSON schema allows ({} bytes): the answer could not "
           "always close", max_new_tokens, json_schema->node(0).min_bytes);
  DG_CHECK(max_new_tokens > 0, "max_new_tokens must be > 0 (got {})", max_new_tokens);
  DG_CHECK(steps > 0, "steps must be > 0 (got {})", steps);
  DG_CHECK(entropy_bound > 0, "entropy_bound must be > 0 (got {})", entropy_bound);
  DG_CHECK(t_min >= 0 && t_max > t_min, "temperature schedule needs t_max > t_min >= 0 (got {} .. {})", t_min, t_max);
  DG_CHECK(stability_threshold >= 0, "stability_threshold must be >= 0 (got {})", stability_threshold);
  DG_CHECK(confidence_threshold > 0, "confidence_threshold must be > 0 (got {})", confidence_threshold);
  DG_CHECK(plateau_steps >= 0 && entropy_stop >= 0 && entropy_stop_min_steps >= 0 && empty_reply_retries >= 0,
           "stop-rule options must be >= 0");
  DG_CHECK(commit_trim_tau >= 0 && commit_trim_tau <= 1, "commit_trim_tau must be in [0, 1] (got {})", commit_trim_tau);
  DG_CHECK(commit_trim_floor >= 1, "commit_trim_floor must be >= 1 (got {})", commit_trim_floor);
  DG_CHECK(sc_sparse_cutoff >= 0 && sc_sparse_cutoff < 1, "sc_sparse_cutoff must be in [0, 1) (got {})",
           sc_sparse_cutoff);
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
  if (profile == SamplerProfile::kReference) {
    o.argmax_commit = false;
    o.first_step_self_embed = false;
    o.plateau_steps = 0;
    o.pad_gate = false;
    o.entropy_stop = 0;
    o.empty_reply_retries = 0;
    o.commit_trim_tau = 0;
    o.sc_sparse_cutoff = 0;
  }
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
