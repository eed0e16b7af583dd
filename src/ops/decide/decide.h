// The sampler's per-step decisions over one canvas, where the row statistics are (SPEC.md §4.3.3): the categorical
// uniforms and the renoise ids from the canvas LCG (src/diffusion/rng.h), the entropy-bound accept, the next canvas
// (in place: accepted rows take the denoised id, the others a fresh id) and the stop rules of both profiles, with
// the stop state (argmax history ring, previous accept mask, plateau run, pad-gated count) kept next to them. The
// decisions are those of Generation::end_step (src/diffusion/stepper.cpp) bit for bit; docs/CUDA.md says why.
#pragma once

#include <cstdint>

#include "ops/row_stats/row_stats.h"

namespace dg {

// The LCG state after k draws from state s is mul * s + add (mod 2^64); a table holds k = 1..n at index k - 1.
struct LcgJump {
  uint64_t mul = 1, add = 0;
};

// One attempt's rules (host constants, SamplerOptions resolved).
struct DecideParams {
  int32_t rows = 0;
  int64_t vocab = 0;
  int32_t history = 1;       // stability_threshold: argmax history ring slots
  bool categorical = false;  // draws (one uniform per row before the renoise ids) instead of argmax commit
  bool contract = true;      // the contract profile's extra stops and pad gate
  int32_t pad_gate_id = -1;  // the pad gate's id (contract, pad_gate on, pad_id >= 0); -1: no gate
  float bound = 0.1f;        // entropy_bound
  double confidence = 0.005, plateau_entropy = 0.05, entropy_stop = 0.05;
  int32_t plateau_steps = 8, entropy_stop_min_steps = 12;
};

// The state that lives with the canvas across the steps of an attempt.
struct DecideState {
  uint64_t lcg = 0;          // the RNG state before the next step's draws
  int32_t step = 0;          // executed steps
  int32_t plateau_run = 0;
  int32_t pad_gated = 0;
  int32_t history_next = 0;  // the ring slot written next
  int32_t has_prev = 0;      // prev_accept holds a mask
  int32_t pad_ = 0;
};

// What the host reads after each step.
struct DecideStatus {
  uint64_t lcg = 0;  // the RNG state after the step's draws
  int32_t stop = 0;  // StopRule
  int32_t accepted = 0;
  float mean_entropy = 0.0f;  // f32(sum of the entropies in f64, row order / rows)
  int32_t step = 0;           // executed steps, the one just decided included
  int32_t pad_gated = 0;
  int32_t pad_ = 0;
};

// The device buffers of one attempt (CPU twin: host memory).
struct DecideBuffers {
  DecideState* state = nullptr;
  int32_t* history = nullptr;     // [history][rows], -1 at the start of an attempt
  uint8_t* prev_accept = nullptr; // [rows]
  const LcgJump* jump = nullptr;  // [2 * rows]
};

// Resets state and history for an attempt whose canvas was drawn up to RNG state `lcg`.
void decide_start_cpu(const DecideParams& p, uint64_t lcg, const DecideBuffers& b);
// The step's categorical uniforms u[rows] (the first `rows` draws after state->lcg; the state does not move).
void decide_uniforms_cpu(const DecideParams& p, const DecideBuffers& b, double* u);
// Decides one step: stats [rows], drawn [rows] (categorical; ignored under argmax commit), canvas [rows] updated in
// place; advances the state past the step's draws.
void decide_cpu(const DecideParams& p, const DecideBuffers& b, const RowStats* stats, const int32_t* drawn,
                int32_t* canvas, DecideStatus* status);

}  // namespace dg
