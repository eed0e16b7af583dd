// The smoketest battery (docs/SMOKETEST.md): prompts with the answers they must give, the step budget each block
// must stay within, and the form the answer must take (stop token, tool call, length). This file owns the JSON
// schema and the verdict rules; running the prompts is smoketest/runner.h. In the style of the original engine's
// smoke test (research/diffgemma.md §6): whole-word, case- and punctuation-insensitive matching, budgets per block.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat/conversation.h"
#include "diffusion/generate.h"

namespace dg::smoke {

struct BatteryPrompt {
  std::string name, kind;  // kind: adherence | thinking | tool | multiblock | convergence
  std::string prompt;      // the user turn
  bool think = false;
  Json tools = Json::array();  // OpenAI tools ({"type":"function","function":{...}}; bare functions are wrapped)
  std::string raw;             // the rendered prompt the model was trained on ("" = not checked)
  std::vector<std::string> accept;        // any of these phrases ...
  std::vector<std::string> accept_regex;  // ... or any of these ECMAScript regexes (case-insensitive) must match
  std::vector<std::string> require;       // every phrase must appear
  std::vector<std::string> reject;        // no phrase may appear
  std::vector<std::string> known_fail;  // sampler profiles in which the model is known to fail this prompt
  int min_tokens = 0;  // answer tokens (the final round's, reasoning included)
  int max_steps = 0;   // no block may take more denoising steps
  // kind "tool": the first reply must be exactly this call, ended by <|tool_response>; then `tool_response` is
  // returned as the call's result and the final answer is checked as above. `continuation_raw`: the whole context
  // the model reads before that answer, as trained ("" = not checked).
  std::string call_name;
  Json call_arguments = Json::object();
  std::string tool_response, continuation_raw;
};

struct Battery {
  int version = 1;
  uint64_t seed = 7;
  std::string sampler = "contract";  // the profile the budgets were measured with
  int canvas_length = 0;             // of the model the budgets belong to (0 = any)
  int max_new_tokens = 160;
  std::vector<BatteryPrompt> prompts;
};

// Throws dg::Error naming the file, the prompt and the field.
Battery parse_battery(const Json& j, const std::string& where);
Battery load_battery(const std::string& path);

// Lower case, every run of characters other than [0-9a-z] as one space, padded with a space on each side.
std::string normalize_words(const std::string& s);
bool has_phrase(const std::string& text, const std::string& phrase);  // whole words, normalised

// One generation of a prompt: what the chat engine returned for one model turn.
struct Round {
  std::string content, reasoning;
  std::vector<ToolCall> tool_calls;
  int tool_errors = 0;        // malformed or truncated calls
  int32_t stop_token = -1;    // -1: the token budget ran out first
  int tokens = 0;             // answer tokens, up to the stop token
  int tool_attempts = 0;      // generations the tool check added (retries or repairs)
  std::vector<BlockInfo> blocks;
};

struct Outcome {
  std::vector<Round> rounds;
  std::string render_error;  // set when the engine's prompt differs from the battery's raw text
};

struct StopIds {
  int32_t turn_close = -1, eos = -1, response_open = -1;
};

// Every reason the outcome fails the prompt ("answer: none of \"Paris\"", "steps: block 1 took 14 > 13", ...);
// empty when it passes.
std::vector<std::string> check_outcome(const BatteryPrompt& p, const Outcome& o, const StopIds& ids);

}  // namespace dg::smoke
