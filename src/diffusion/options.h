// SamplerOptions: every knob of the generation loop. Two profiles (SPEC.md decisions table):
//   contract  (default) the seed's production contract; each divergence from the reference is a named option with
//             the seed's default: argmax commit, step-1 self-conditioning seed, plateau / pad-gate / entropy-only
//             stops, empty-first-block re-roll, commit-time confidence trim, sparse self-conditioning.
//   reference           transformers semantics exactly: every divergence off, categorical draws from our LCG.
// The members a user sets are the rows of kSamplerSettings (diffusion/sampler_settings.h: range, flag, request field,
// op-log key, reference value); a member's initializer here is its contract default.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/generation_config.h"

namespace dg {

struct JsonVocab;
class JsonSchema;
struct ToolCallConstraint;

enum class SamplerProfile : uint8_t { kContract, kReference };
SamplerProfile sampler_profile_from_name(const std::string& name);  // "contract" | "reference"; throws otherwise
const char* sampler_profile_name(SamplerProfile p);

inline constexpr double kSparseScCutoff = 4.5399929762484854e-05;  // e^-10: survivor self-conditioning's cutoff

struct SamplerOptions {
  SamplerProfile profile = SamplerProfile::kContract;
  uint64_t seed = 42;

  // From generation_config.json (overridable per request).
  int max_new_tokens = 256;
  int steps = 48;  // max_denoising_steps
  double entropy_bound = 0.1;
  double t_min = 0.4, t_max = 0.8;
  int stability_threshold = 1;
  double confidence_threshold = 0.005;
  std::vector<int32_t> stop_ids;  // generation_config eos_token_id
  int32_t pad_id = 0;
  int32_t bos_id = 2;

  // Contract divergences (the reference profile turns each off).
  bool argmax_commit = true;            // accepted positions take the argmax, not a categorical draw
  bool first_step_self_embed = true;    // step 1 runs the SC MLP on the canvas's own embedding (not zero)
  int plateau_steps = 8;                // accept mask unchanged this many steps ...
  double plateau_mean_entropy = 0.05;   // ... with mean entropy below this: stop (0 steps = off)
  bool pad_gate = true;                 // an all-pad argmax canvas never stops
  double entropy_stop = 0.05;           // stop when mean entropy < this ... (0 = off)
  int entropy_stop_min_steps = 12;      // ... after at least this many steps
  int empty_reply_retries = 3;          // re-roll a first block that starts with a stop/control token
  double commit_trim_tau = 0.9;         // trim a block at a low-confidence duplicated row (0 = off)
  int commit_trim_floor = 16;           // rows below this index are never trimmed
  double sc_sparse_cutoff = kSparseScCutoff;  // survivor self-conditioning (0 = exact)

  // JSON mode (response_format json_object): each committed block is constrained so that the answer is one JSON
  // object (src/diffusion/json_commit.h). nullptr: unconstrained.
  std::shared_ptr<const JsonVocab> json;
  // With `json`: the object also validates against this schema (response_format json_schema; json_schema.h).
  std::shared_ptr<const JsonSchema> json_schema;
  // Strict tool calls: every tool call the answer opens is constrained to the call grammar over these tools, a
  // strict tool's arguments to its schema (src/diffusion/call_commit.h). nullptr: calls are the model's.
  std::shared_ptr<const ToolCallConstraint> tool_calls;
  // A commit-time constraint is on: the driver must give the generation logits rows (Generation::set_row_logits).
  bool constrained() const { return json != nullptr || tool_calls != nullptr; }

  // Run the per-step decisions on the host even where the backend could keep them (an A/B of the two paths: the
  // same tokens). Steps observed through GenerateEvents::on_step always decide on the host.
  bool host_decisions = false;

  void validate() const;  // every row's range and t_max > t_min; throws dg::Error naming the bad option
};

// The profile's defaults on top of a checkpoint's generation config.
SamplerOptions make_sampler_options(SamplerProfile profile, const GenerationConfig& gen, int32_t pad_id,
                                    int32_t bos_id);

// Exactly `steps` denoising steps per block and no stop token, every early stop off (the contract profile's
// decisions otherwise): the benchmarks' fixed-step convention, `max_new_tokens` committed per request.
SamplerOptions fixed_step_options(int steps, int max_new_tokens);

}  // namespace dg
