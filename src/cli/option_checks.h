// Value checks for command-line options, run when the line is parsed (before any model loads): a value that means
// nothing (a zero step count, a negative threshold, an infinite temperature, a negative seed) is a usage error
// naming the option, never a silent default. An option that is not given is "unset" (std::optional): the model's
// or the profile's default applies; every given value is checked.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace dg::cli {

CLI::Validator positive_int();            // an integer >= 1
CLI::Validator non_negative_int();        // an integer >= 0 (a uint64 seed too: "-1" does not wrap around)
CLI::Validator port_number();             // a TCP port, 0 to 65535 (a larger one must not wrap around)
CLI::Validator positive_finite();         // a finite number > 0
CLI::Validator non_negative_finite();     // a finite number >= 0
CLI::Validator unit_interval();           // a finite number in [0, 1]
CLI::Validator positive_int_list();       // comma-separated integers >= 1 ("512,4096"), at least one
CLI::Validator attention_topk_value();    // off | dyn | K in 1..4096 (attn_topk_from_name)
// --attention-topk's help text (ask, chat, serve, replay, smoketest and bench share it).
const char* attention_topk_help();
const char* linear_act_help();
const char* vocab_act_help();
// A switch (add_flag): bare, or given a boolean (--graphs=false, --no-graphs=on); a count such as --no-graphs=2
// means nothing for a switch.
CLI::Validator switch_value();

// An option that takes one of `names` (a choice table such as src/backend/cuda/cuda_kernels.h's) and sets `target`:
// the help lists the names and the default, a value outside them is a usage error that lists them.
template <class E, size_t N>
CLI::Option* add_choice(CLI::App* cmd, const std::string& flag, E& target,
                        const std::array<std::pair<std::string_view, E>, N>& names, const std::string& help) {
  std::vector<std::string> list;
  std::string now;
  for (const auto& [n, v] : names) {
    list.emplace_back(n);
    if (v == target) now = n;
  }
  const auto set = [&target, &names](const std::string& s) {
    for (const auto& [n, v] : names)
      if (n == s) target = v;
  };
  return cmd->add_option_function<std::string>(flag, set, help)->check(CLI::IsMember(list))->default_str(now);
}

// --threads: unset -> 0 (the CPUs this process may use); a count above them is clamped to them with a warning on
// stderr (threads beyond the usable CPUs only switch between each other; tens of thousands exhaust the host).
int threads_for(const std::optional<int>& requested);

}  // namespace dg::cli
