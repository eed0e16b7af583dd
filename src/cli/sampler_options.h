// Sampler options on the command line: the profile, one flag per row of the sampler settings table
// (src/diffusion/sampler_settings.h), and where the decisions run. A flag not given is unset and keeps the base's
// value (the profile's default, SamplerOptions in src/diffusion/options.h); a given value is checked against its row's
// range when the line is parsed, as a usage error naming the flag (cli/option_checks.h).
#pragma once

#include <array>
#include <iterator>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/tool_check.h"
#include "diffusion/sampler_settings.h"
#include "engine/engine_core.h"

namespace dg::cli {

struct SamplerFlags {
  std::string profile = "contract";
  bool host_decisions = false;
  std::array<std::optional<std::string>, std::size(kSamplerSettings)> values;  // per row, as given

  void add_to(CLI::App* cmd);
  SamplerOptions apply(SamplerOptions base) const;     // the given values on top of base; validates (throws dg::Error)
  SamplerOptions resolve(const EngineCore& engine) const;  // apply() on the engine's defaults for the profile
};

// --tool-check off|retry|repair and --tool-attempts N: what happens to a reply whose tool calls are invalid.
struct ToolCheckFlags {
  std::string mode = "repair";
  int attempts = 2;
  bool strict = false;

  void add_to(CLI::App* cmd);
  ToolCheckOptions resolve() const;  // throws dg::Error naming the option
};

}  // namespace dg::cli
