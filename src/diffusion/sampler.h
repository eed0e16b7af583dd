// The entropy-bound sampler's per-step decisions on the host (SPEC.md §4.3.3, seed §6): the temperature schedule, the
// accept rule and the stopping rules of both profiles. The accept and stop rules are the decide op's own bodies
// (src/ops/decide/decide_rule.h), which the CPU twin and the CUDA kernel run too.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "diffusion/options.h"
#include "diffusion/rng.h"
#include "ops/decide/decide.h"
#include "ops/row_stats/row_stats.h"

namespace dg {

// T for `cur` steps remaining out of n, computed in f32 exactly as the reference's tensor arithmetic:
// f32(f32(f32(t_max - t_min) * f32(f32(cur) / f32(n))) + f32(t_min)).
float schedule_temperature(int cur, int n, double t_min, double t_max);

// Accepts the lowest-entropy positions while the sum of the strictly lower-ranked entropies is <= bound
// (computed as the reference does: inclusive f32 cumsum minus the element). The lowest is always accepted.
std::vector<uint8_t> entropy_bound_accept(std::span<const float> entropy, double bound);

// The decide op's rules for an attempt over `rows` canvas rows of a `vocab`-id vocabulary under `opt`.
DecideParams decide_params(const SamplerOptions& opt, int32_t rows, int64_t vocab);

enum class StopRule : uint8_t { kNone, kConfident, kPlateau, kEntropy };
const char* stop_rule_name(StopRule r);

// Per-block stopping state: the argmax history ring of the reference (initialised to -1, so step 1 is never
// stable) plus the contract's plateau counter.
class StopState {
 public:
  StopState(const SamplerOptions& opt, int canvas);
  // Decides after a step; step_index counts executed steps of this block from 1.
  StopRule update(std::span<const int32_t> argmax, std::span<const uint8_t> accept, double mean_entropy,
                  int step_index);
  int pad_gated() const { return state_.pad_gated; }  // steps at which the pad gate held an all-pad canvas

 private:
  DecideParams params_;
  DecideState state_;
  std::vector<std::vector<int32_t>> history_;
  size_t next_ = 0;
  std::vector<uint8_t> prev_accept_;
};

}  // namespace dg
