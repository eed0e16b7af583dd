// Runs battery prompts through the chat engine path (ChatSession: the Gemma 4 template, tool rounds, thinking,
// the block loop with the chosen sampler profile) and collects what the sampler did: steps per block, tokens
// per forward, and how each block's denoising ended (stop rules, re-rolls, trims, the pad gate).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/tool_check.h"
#include "engine/engine_core.h"
#include "smoketest/battery.h"

namespace dg::smoke {

// One prompt from a fresh conversation: the render check against `raw`, the user turn, and for kind "tool" the
// call's result and the final answer.
// `check`: what happens to a reply whose tool calls are invalid (engine/tool_check.h).
Outcome run_prompt(const EngineCore& engine, const BatteryPrompt& p, const SamplerOptions& opt,
                   const ToolCheckOptions& check = {});

StopIds stop_ids(const EngineCore& engine);

// Sampler behaviour over many generations (every round of every prompt).
struct Stats {
  int blocks = 0;
  int steps = 0;     // denoising steps of the committed attempts
  int forwards = 0;  // denoise forwards, re-rolled attempts included
  int64_t committed = 0;      // tokens committed into blocks (after a stop token too)
  int64_t answer_tokens = 0;  // tokens up to the stop token
  int confident = 0, plateau = 0, entropy = 0, budget = 0;  // how each block's denoising ended
  int rerolls = 0;    // empty first blocks re-rolled
  int trims = 0;      // blocks cut by the commit-time confidence trim
  int pad_gated = 0;  // steps at which the pad gate kept an all-pad canvas from stopping

  void add(const Round& r);
  double steps_per_block() const { return blocks ? static_cast<double>(steps) / blocks : 0.0; }
  double answer_tokens_per_forward() const { return forwards ? static_cast<double>(answer_tokens) / forwards : 0.0; }
  double committed_per_forward() const { return forwards ? static_cast<double>(committed) / forwards : 0.0; }
};

}  // namespace dg::smoke
