// The pieces of the decide op that the CPU twin, the CUDA kernel and the host sampler (src/diffusion/sampler.cpp)
// share as one source: an LCG draw from a jump table entry, the entropy-bound accept and the stop rules on already
// reduced inputs.
// Stop rules are StopRule's values: 0 none, 1 confident, 2 plateau, 3 entropy.
#pragma once

#include <cstdint>

#include "core/host_device.h"
#include "ops/decide/decide.h"

namespace dg {

// The high 32 bits of the state k draws after s (j: the table entry for k).
DG_HOST_DEVICE inline uint32_t lcg_draw(const LcgJump& j, uint64_t s) {
  return static_cast<uint32_t>((j.mul * s + j.add) >> 32);
}
DG_HOST_DEVICE inline double lcg_uniform(uint32_t x) { return static_cast<double>(x) / 4294967296.0; }
DG_HOST_DEVICE inline int32_t lcg_randint(uint32_t x, int64_t n) {
  return static_cast<int32_t>((static_cast<uint64_t>(x) * static_cast<uint64_t>(n)) >> 32);
}

// The entropy-bound accept over rows already in stable ascending-entropy order (ties by index): an inclusive f32
// cumsum in that order, a row accepted where cum - h <= bound (entropy_bound_accept, src/diffusion/sampler.cpp, sorts
// and calls this).
DG_HOST_DEVICE inline void decide_accept_sorted(const float* entropy, const int32_t* order, int32_t rows, float bound,
                                                uint8_t* accept) {
  float cum = 0.0f;
  for (int32_t k = 0; k < rows; ++k) {
    const float h = entropy[order[k]];
    cum += h;
    accept[order[k]] = cum - h <= bound ? 1 : 0;
  }
}

// stable: the argmax equals every history slot; same_accept: the accept mask equals the previous step's; all_pad:
// every argmax is p.pad_gate_id; mean: the step's mean entropy (the kernel's f32 value, widened).
// Updates the plateau run and the pad-gated count in st; step_index counts executed steps from 1.
DG_HOST_DEVICE inline int32_t decide_stop_rule(const DecideParams& p, DecideState& st, bool stable, bool same_accept,
                                               bool all_pad, double mean, int32_t step_index) {
  st.plateau_run = same_accept ? st.plateau_run + 1 : 1;
  if (p.pad_gate_id >= 0 && all_pad) {
    ++st.pad_gated;
    return 0;  // an all-pad canvas is a degenerate forward, never a converged answer
  }
  if (stable && mean < p.confidence) return 1;
  if (!p.contract) return 0;
  if (p.plateau_steps > 0 && st.plateau_run >= p.plateau_steps && mean < p.plateau_entropy) return 2;
  if (p.entropy_stop > 0.0 && step_index >= p.entropy_stop_min_steps && mean < p.entropy_stop) return 3;
  return 0;
}

}  // namespace dg
