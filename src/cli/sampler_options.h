// Sampler options on the command line: the profile, the generation-config values, and one named option for each
// contract divergence. An option not given is unset and keeps the profile's default (SamplerOptions in
// src/diffusion/options.h); a given value is checked when the line is parsed (cli/option_checks.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/tool_check.h"
#include "dg/engine.h"

namespace dg::cli {

struct SamplerFlags {
  std::string profile = "contract";
  uint64_t seed = 42;
  std::optional<int> max_new_tokens, steps, stability_threshold;
  std::optional<double> entropy_bound, t_min, t_max, confidence_threshold;
  std::string denoise_token, first_step_sc, pad_gate, self_conditioning;
  std::optional<int> plateau_steps, entropy_stop_min_steps, empty_reply_retries, commit_trim_floor;
  std::optional<double> plateau_mean_entropy, entropy_stop, commit_trim_tau;
  bool host_decisions = false;

  void add_to(CLI::App* cmd);
  SamplerOptions resolve(const Engine& engine) const;  // validates; throws dg::Error naming the option
};

// --tool-check off|retry|repair and --tool-attempts N: what happens to a reply whose tool calls are invalid.
struct ToolCheckFlags {
  std::string mode = "repair";
  int attempts = 2;

  void add_to(CLI::App* cmd);
  ToolCheckOptions resolve() const;  // throws dg::Error naming the option
};

}  // namespace dg::cli
