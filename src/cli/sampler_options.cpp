#include "cli/sampler_options.h"

#include <cmath>

#include "cli/option_checks.h"
#include "core/error.h"

namespace dg::cli {

void SamplerFlags::add_to(CLI::App* cmd) {
  cmd->add_option("--sampler", profile, "sampler profile: contract (the production contract) | reference "
                                        "(transformers semantics exactly)")
      ->check(CLI::IsMember({"contract", "reference"}))
      ->capture_default_str();
  cmd->add_option("--seed", seed, "canvas RNG seed")->check(non_negative_int())->capture_default_str();
  cmd->add_option("--max-new-tokens", max_new_tokens, "answer length limit (default: generation_config.json)")
      ->check(positive_int());
  cmd->add_option("--steps", steps, "denoising steps per block (default: generation_config.json)")->check(positive_int());
  cmd->add_option("--entropy-bound", entropy_bound, "accept budget in nats (default: generation_config.json)")
      ->check(positive_finite());
  cmd->add_option("--t-min", t_min, "temperature at the last step")->check(non_negative_finite());
  cmd->add_option("--t-max", t_max, "temperature at the first step")->check(positive_finite());
  cmd->add_option("--confidence-threshold", confidence_threshold, "stop when mean entropy is below this and stable")
      ->check(positive_finite());
  cmd->add_option("--stability-threshold", stability_threshold, "steps the argmax must repeat before stopping")
      ->check(non_negative_int());
  cmd->add_flag("--host-decisions", host_decisions,
                "run the per-step sampler decisions on the host instead of the backend (A/B; same tokens)");
  auto* g = cmd->add_option_group("contract", "contract-profile divergences (seed defaults; --sampler reference "
                                              "turns all of them off)");
  g->add_option("--denoise-token", denoise_token, "token taken at accepted positions: argmax | sample")
      ->check(CLI::IsMember({"argmax", "sample"}));
  g->add_option("--first-step-sc", first_step_sc, "step-1 self-conditioning: self (canvas embedding) | zero")
      ->check(CLI::IsMember({"self", "zero"}));
  g->add_option("--plateau-steps", plateau_steps, "stop after the accept mask repeats this many steps (0: off)")
      ->check(non_negative_int());
  g->add_option("--plateau-entropy", plateau_mean_entropy, "... while mean entropy is below this")
      ->check(non_negative_finite());
  g->add_option("--pad-gate", pad_gate, "never stop on an all-pad canvas: on | off")
      ->check(CLI::IsMember({"on", "off"}));
  g->add_option("--entropy-stop", entropy_stop, "stop when mean entropy is below this (0: off)")
      ->check(non_negative_finite());
  g->add_option("--entropy-stop-min-steps", entropy_stop_min_steps, "... after at least this many steps")
      ->check(non_negative_int());
  g->add_option("--empty-reply-retries", empty_reply_retries, "re-rolls of a first block that opens with a stop token")
      ->check(non_negative_int());
  g->add_option("--commit-trim-tau", commit_trim_tau, "confidence trim threshold on p_max (0: off)")
      ->check(unit_interval());
  g->add_option("--commit-trim-floor", commit_trim_floor, "rows below this index are never trimmed")
      ->check(positive_int());
  g->add_option("--self-conditioning", self_conditioning, "soft embedding: sparse (survivors >= e^-10 p_max) | exact")
      ->check(CLI::IsMember({"sparse", "exact"}));
}

SamplerOptions SamplerFlags::resolve(const Engine& engine) const {
  SamplerOptions o = engine.default_sampler(sampler_profile_from_name(profile));
  o.seed = seed;
  auto set = [](auto& field, const auto& flag) {
    if (flag) field = *flag;
  };
  set(o.max_new_tokens, max_new_tokens);
  set(o.steps, steps);
  set(o.entropy_bound, entropy_bound);
  set(o.t_min, t_min);
  set(o.t_max, t_max);
  set(o.confidence_threshold, confidence_threshold);
  set(o.stability_threshold, stability_threshold);
  if (!denoise_token.empty()) o.argmax_commit = denoise_token == "argmax";
  if (!first_step_sc.empty()) o.first_step_self_embed = first_step_sc == "self";
  set(o.plateau_steps, plateau_steps);
  set(o.plateau_mean_entropy, plateau_mean_entropy);
  if (!pad_gate.empty()) o.pad_gate = pad_gate == "on";
  set(o.entropy_stop, entropy_stop);
  set(o.entropy_stop_min_steps, entropy_stop_min_steps);
  set(o.empty_reply_retries, empty_reply_retries);
  set(o.commit_trim_tau, commit_trim_tau);
  set(o.commit_trim_floor, commit_trim_floor);
  if (!self_conditioning.empty()) o.sc_sparse_cutoff = self_conditioning == "exact" ? 0.0 : std::exp(-10.0);
  o.host_decisions = host_decisions;
  o.validate();
  return o;
}

void ToolCheckFlags::add_to(CLI::App* cmd) {
  cmd->add_option("--tool-check", mode,
                  "a reply whose tool calls are malformed or fail the declared schema: off (handed on) | retry "
                  "(generated again with the next seed) | repair (the model sees its errors and writes the reply "
                  "again; docs/TOOLS.md)")
      ->check(CLI::IsMember({"off", "retry", "repair"}))
      ->capture_default_str();
  cmd->add_option("--tool-attempts", attempts, "generations --tool-check may add to a reply (0 to 16)")
      ->check(CLI::Range(0, 16))
      ->capture_default_str();
}

ToolCheckOptions ToolCheckFlags::resolve() const {
  DG_CHECK(attempts >= 0 && attempts <= 16, "--tool-attempts must be in [0, 16], got {}", attempts);
  return ToolCheckOptions{tool_check_mode_from_name(mode), attempts};
}

}  // namespace dg::cli
