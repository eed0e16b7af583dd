// dg::Request: one generation as the public API takes it: the prompt (text, rendered as one user turn of the chat
// template unless `raw`, or token ids used as they are), the answer budget, the seed, stop strings and the sampler's
// settings by name. Plain data: the engine checks it when generating and throws std::runtime_error naming the field.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dg {

// The sampler: a profile and any of its settings by name. The names are the rows of the sampler's settings table
// (docs/SAMPLER.md, "Settings": "steps", "entropy_bound", "t_min", "t_max", "pad_gate", ...); a yes/no setting takes
// 1 or 0. A setting not named keeps the profile's value on top of the model's generation_config.json.
struct Sampling {
  std::string profile = "contract";        // contract | reference (docs/SAMPLER.md)
  std::map<std::string, double> settings;  // {"steps", 24}, {"entropy_bound", 0.2}; seed and budget: Request
};

struct Request {
  std::string prompt;               // the prompt as text (needs the model's tokenizer) ...
  std::vector<int32_t> prompt_ids;  // ... or as token ids, used as they are; exactly one of the two
  bool raw = false;                 // text: encode it as is (special-token literals recognised), no chat turn
  bool thinking = false;            // chat turn: thinking mode; the reasoning comes apart from the answer
  int max_new_tokens = 0;           // answer budget in tokens; 0: the model's (generation_config.json)
  uint64_t seed = 42;               // the canvas RNG's seed: the same request and seed give the same tokens
  std::vector<std::string> stop;    // the answer's text ends before the first of these (needs the tokenizer)
  Sampling sampling;
};

}  // namespace dg
