// The sampler's settings as one table: a row per SamplerOptions member a user sets, naming it everywhere it appears.
// The command line's flags (src/cli/sampler_options.cpp), a request's fields (src/server/wire_request.cpp), the
// op-log's sampler record (src/engine/oplog.cpp), SamplerOptions::validate and the reference profile's values
// (make_sampler_options) are all derived from it. A row's contract default is its member's initializer in
// options.h. docs/SAMPLER.md ("Settings") says how to add one; tests/unit/sampler_settings_test.cpp checks every row.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "diffusion/options.h"

namespace dg {

// The values a setting allows: lo .. hi, each end closed or open; an infinite end is no bound. An integer setting
// is also bounded by its type (an int's 2^31 - 1).
struct SettingRange {
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;
};
constexpr SettingRange at_least(double lo) { return {lo}; }
constexpr SettingRange above(double lo) { return {lo, std::numeric_limits<double>::infinity(), true}; }
constexpr SettingRange between(double lo, double hi) { return {lo, hi}; }
constexpr SettingRange from_up_to(double lo, double hi) { return {lo, hi, false, true}; }  // [lo, hi)
constexpr SettingRange kAnyBool{0, 1};

// A word the command line takes for a value ("--pad-gate off" for false).
struct SettingWord {
  const char* word;
  double value;
};

enum class SettingGroup : uint8_t {
  kRun,         // chosen per run (the seed)
  kGeneration,  // a generation_config.json value: the checkpoint gives its default
  kContract,    // a contract divergence or one of its parameters (the command line's "contract" group)
};

using SettingMember =
    std::variant<int SamplerOptions::*, double SamplerOptions::*, uint64_t SamplerOptions::*, bool SamplerOptions::*>;
// The member's type for one of SettingMember's alternatives (visit a row's member with a generic lambda).
template <typename M>
using SettingType = std::remove_reference_t<decltype(std::declval<SamplerOptions&>().*std::declval<M>())>;

struct SamplerSetting {
  const char* name;      // the member's name: the op-log key, and the name validate() reports
  SettingMember member;  // the SamplerOptions member
  SettingRange range;
  const char* flag;      // the command-line flag
  const char* wire;      // the request field; nullptr: not settable per request
  SettingGroup group;
  const char* help;      // the command line's help (the default is appended)
  std::optional<double> reference = std::nullopt;  // the reference profile's value; none: the contract's default
  std::span<const SettingWord> words = {};         // words the command line takes instead of a number
};

inline constexpr SettingWord kDenoiseTokenWords[] = {{"argmax", 1}, {"sample", 0}};
inline constexpr SettingWord kFirstStepScWords[] = {{"self", 1}, {"zero", 0}};
inline constexpr SettingWord kOnOffWords[] = {{"on", 1}, {"off", 0}};
inline constexpr SettingWord kSelfConditioningWords[] = {{"sparse", kSparseScCutoff}, {"exact", 0}};

// In op-log order (a sampler record lists them so, with the model's stop/pad/bos ids before the contract group).
// The seed takes any 64-bit integer on the wire, a negative one modulo 2^64 (OpenAI clients send signed seeds); a
// request without one gets a random seed. A request's steps are bounded by `serve --max-steps` too. max_new_tokens is
// the wire's max_tokens / max_completion_tokens, checked against the context with them (wire_request.cpp).
inline constexpr SamplerSetting kSamplerSettings[] = {
    {"seed", &SamplerOptions::seed, at_least(0), "--seed", "seed", SettingGroup::kRun, "canvas RNG seed"},
    {"max_new_tokens", &SamplerOptions::max_new_tokens, at_least(1), "--max-new-tokens", nullptr,
     SettingGroup::kGeneration, "answer length limit"},
    {"steps", &SamplerOptions::steps, between(1, std::numeric_limits<int>::max()), "--steps", "steps",
     SettingGroup::kGeneration, "denoising steps per block"},
    {"entropy_bound", &SamplerOptions::entropy_bound, above(0), "--entropy-bound", "entropy_bound",
     SettingGroup::kGeneration, "accept budget in nats"},
    {"t_min", &SamplerOptions::t_min, at_least(0), "--t-min", "t_min", SettingGroup::kGeneration,
     "temperature at the last step"},
    {"t_max", &SamplerOptions::t_max, above(0), "--t-max", "t_max", SettingGroup::kGeneration,
     "temperature at the first step"},
    {"stability_threshold", &SamplerOptions::stability_threshold, at_least(0), "--stability-threshold", nullptr,
     SettingGroup::kGeneration, "steps the argmax must repeat before stopping"},
    {"confidence_threshold", &SamplerOptions::confidence_threshold, above(0), "--confidence-threshold",
     "confidence_threshold", SettingGroup::kGeneration, "stop when mean entropy is below this and stable"},
    {"argmax_commit", &SamplerOptions::argmax_commit, kAnyBool, "--denoise-token", nullptr, SettingGroup::kContract,
     "token taken at accepted positions: argmax | sample", 0, kDenoiseTokenWords},
    {"first_step_self_embed", &SamplerOptions::first_step_self_embed, kAnyBool, "--first-step-sc", nullptr,
     SettingGroup::kContract, "step-1 self-conditioning: self (canvas embedding) | zero", 0, kFirstStepScWords},
    {"plateau_steps", &SamplerOptions::plateau_steps, at_least(0), "--plateau-steps", nullptr,
     SettingGroup::kContract, "stop after the accept mask repeats this many steps (0: off)", 0},
    {"plateau_mean_entropy", &SamplerOptions::plateau_mean_entropy, at_least(0), "--plateau-entropy", nullptr,
     SettingGroup::kContract, "... while mean entropy is below this"},
    {"pad_gate", &SamplerOptions::pad_gate, kAnyBool, "--pad-gate", nullptr, SettingGroup::kContract,
     "never stop on an all-pad canvas: on | off", 0, kOnOffWords},
    {"entropy_stop", &SamplerOptions::entropy_stop, at_least(0), "--entropy-stop", nullptr, SettingGroup::kContract,
     "stop when mean entropy is below this (0: off)", 0},
    {"entropy_stop_min_steps", &SamplerOptions::entropy_stop_min_steps, at_least(0), "--entropy-stop-min-steps",
     nullptr, SettingGroup::kContract, "... after at least this many steps"},
    {"empty_reply_retries", &SamplerOptions::empty_reply_retries, at_least(0), "--empty-reply-retries", nullptr,
     SettingGroup::kContract, "re-rolls of a first block that opens with a stop token", 0},
    {"commit_trim_tau", &SamplerOptions::commit_trim_tau, between(0, 1), "--commit-trim-tau", nullptr,
     SettingGroup::kContract, "confidence trim threshold on p_max (0: off)", 0},
    {"commit_trim_floor", &SamplerOptions::commit_trim_floor, at_least(1), "--commit-trim-floor", nullptr,
     SettingGroup::kContract, "rows below this index are never trimmed"},
    {"sc_sparse_cutoff", &SamplerOptions::sc_sparse_cutoff, from_up_to(0, 1), "--self-conditioning", nullptr,
     SettingGroup::kContract, "soft embedding: sparse (survivors >= e^-10 p_max) | exact", 0, kSelfConditioningWords},
};

// Whether v is within the row's range (and its member type's).
bool setting_in_range(const SamplerSetting& s, double v);
// The range in words: ">= 1", "> 0", "between 1 and 4096", "in [0, 1)".
std::string setting_range_text(const SamplerSetting& s);
// The member's value as text: its word where the row has words, else the number.
std::string setting_text(const SamplerSetting& s, const SamplerOptions& o);
// Sets the member to v (a row's reference value or a word's value).
void setting_assign(const SamplerSetting& s, SamplerOptions& o, double v);

}  // namespace dg
