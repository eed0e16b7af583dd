#include "cli/sampler_options.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace dg::cli {
namespace {

// Sets the row's member from its command-line text: one of its words, else a number of the member's type within the
// row's range. False (o unchanged) when the text is neither.
bool set_from_text(const SamplerSetting& s, const std::string& text, SamplerOptions& o) {
  for (const SettingWord& w : s.words) {
    if (text != w.word) continue;
    setting_assign(s, o, w.value);
    return true;
  }
  if (!s.words.empty() || text.empty()) return false;
  return std::visit(
      [&](auto m) {
        using T = SettingType<decltype(m)>;
        T v{};
        if constexpr (std::is_same_v<T, bool>) {
          return false;  // a switch is set by its words
        } else if constexpr (std::is_integral_v<T>) {
          const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);  // "-1" is no uint64
          if (ec != std::errc() || end != text.data() + text.size()) return false;
        } else {
          char* end = nullptr;
          v = std::strtod(text.c_str(), &end);
          if (end != text.c_str() + text.size() || !std::isfinite(v)) return false;
        }
        if (!setting_in_range(s, static_cast<double>(v))) return false;
        o.*m = v;
        return true;
      },
      s.member);
}

// "an integer >= 1", "a finite number > 0", "a number between 0 and 1".
std::string value_text(const SamplerSetting& s) {
  const bool integer = !std::holds_alternative<double SamplerOptions::*>(s.member);
  return fmt::format("{} {}", integer ? "an integer" : std::isinf(s.range.hi) ? "a finite number" : "a number",
                     setting_range_text(s));
}

// The help's type: INT, UINT, FLOAT, or TEXT for a row of words.
const char* type_name(const SamplerSetting& s) {
  if (!s.words.empty()) return "TEXT";
  if (std::holds_alternative<uint64_t SamplerOptions::*>(s.member)) return "UINT";
  return std::holds_alternative<double SamplerOptions::*>(s.member) ? "FLOAT" : "INT";
}

CLI::Validator value_check(const SamplerSetting& s) {
  if (!s.words.empty()) {
    std::vector<std::string> words;
    for (const SettingWord& w : s.words) words.emplace_back(w.word);
    return CLI::IsMember(words);
  }
  const std::string desc = value_text(s);
  return CLI::Validator(
      [&s, desc](std::string& text) -> std::string {
        SamplerOptions scratch;
        return set_from_text(s, text, scratch) ? std::string() : fmt::format("'{}' is not {}", text, desc);
      },
      desc);
}

}  // namespace

void SamplerFlags::add_to(CLI::App* cmd) {
  cmd->add_option("--sampler", profile, "sampler profile: contract (the production contract) | reference "
                                        "(transformers semantics exactly)")
      ->check(CLI::IsMember({"contract", "reference"}))
      ->capture_default_str();
  auto* contract = cmd->add_option_group("contract", "contract-profile divergences (seed defaults; --sampler "
                                                     "reference turns all of them off)");
  const SamplerOptions defaults;
  for (size_t i = 0; i < values.size(); ++i) {
    const SamplerSetting& s = kSamplerSettings[i];
    CLI::App* at = s.group == SettingGroup::kContract ? contract : cmd;
    const bool generation = s.group == SettingGroup::kGeneration;
    CLI::Option* opt = at->add_option(
        s.flag, values[i], generation ? fmt::format("{} (default: generation_config.json)", s.help) : s.help);
    opt->type_name(type_name(s))->check(value_check(s));
    if (!generation) opt->default_str(setting_text(s, defaults));
  }
  cmd->add_flag("--host-decisions", host_decisions,
                "run the per-step sampler decisions on the host instead of the backend (A/B; same tokens)");
}

SamplerOptions SamplerFlags::apply(SamplerOptions o) const {
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i])
      DG_CHECK(set_from_text(kSamplerSettings[i], *values[i], o), "{}: '{}' is not {}", kSamplerSettings[i].flag,
               *values[i], value_text(kSamplerSettings[i]));
  o.host_decisions = host_decisions;
  o.validate();
  return o;
}

SamplerOptions SamplerFlags::resolve(const EngineCore& engine) const {
  return apply(engine.default_sampler(sampler_profile_from_name(profile)));
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
  cmd->add_flag("--strict-tools", strict,
                "every declared tool is strict (OpenAI's \"strict\": true): its calls are constrained to its schema "
                "while the canvas is denoised (docs/TOOLS.md)");
}

ToolCheckOptions ToolCheckFlags::resolve() const {
  DG_CHECK(attempts >= 0 && attempts <= 16, "--tool-attempts must be in [0, 16], got {}", attempts);
  return ToolCheckOptions{tool_check_mode_from_name(mode), attempts, strict};
}

}  // namespace dg::cli
