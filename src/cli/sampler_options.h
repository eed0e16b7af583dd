// Sampler options on the command line: the profile, the generation-config values, and one named option for each
// contract divergence. Values not given keep the profile's default (SamplerOptions in src/diffusion/options.h).
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "chat/tool_check.h"
#include "dg/engine.h"

namespace dg::cli {

struct SamplerFlags {
  std::string profile = "contract";
  uint64_t seed = 42;
  int max_new_tokens = 0, steps = 0, stability_threshold = -1;
  double entropy_bound = 0, t_min = -1, t_max = -1, confidence_threshold = 0;
  std::string denoise_token, first_step_sc, pad_gate, self_conditioning;
  int plateau_steps = -1, entropy_stop_min_steps = -1, empty_reply_retries = -1, commit_trim_floor = -1;
  double plateau_mean_entropy = -1, entropy_stop = -1, commit_trim_tau = -1;
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
