// What a generation reports while it runs (dg::Event: the prompt's prefill, each committed block, the end) and what
// it returns (dg::Result). Events arrive in that order, on the thread that called Engine::generate.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

namespace dg {

enum class Finish : uint8_t {
  kStop,       // a stop token or stop string ended the answer
  kLength,     // the answer budget (or the model's positions) ran out
  kCancelled,  // the caller's cancel check asked to end it
};
const char* finish_text(Finish f);  // "stop" | "length" | "cancelled"

struct Timings {
  double prefill_s = 0;      // the prompt's encode, until the device finished it
  double first_block_s = 0;  // from the call to the first committed block (prefill included); 0: none committed
  double total_s = 0;        // the whole call
};

struct Result {
  std::vector<int32_t> tokens;  // the answer: cut at the first stop token or stop string, and to the budget
  std::string text;             // the answer's text (a chat turn: the reply's content); empty without a tokenizer
  std::string reasoning;        // a chat turn in thinking mode: the thought channel's text
  Finish finish = Finish::kLength;
  int32_t stop_token = -1;  // the stop token that ended the answer; -1: none
  int64_t prompt_tokens = 0;
  int blocks = 0;    // committed blocks
  int forwards = 0;  // denoise forwards in all
  Timings timings;
};

// The prompt's prefill, chunk by chunk: `done` of `total` tokens encoded (first 0 of total, last total of total).
struct PrefillEvent {
  int64_t done = 0, total = 0;
};

// One committed block: its answer tokens (after a stop token or past the budget: none) and the text they complete
// (UTF-8, whole characters; a stop string may hold text back until it can no longer start one).
struct BlockEvent {
  int block = 0;  // from 0
  int steps = 0;  // denoise steps the block took
  std::vector<int32_t> tokens;
  std::string text, reasoning;  // reasoning: a chat turn in thinking mode
};

// The end: the text the block events held back (a character's last bytes, text that might have begun a stop string)
// and the Result that Engine::generate returns. The blocks' texts and then this one's make Result::text (and the
// same for the reasoning).
struct DoneEvent {
  std::string text, reasoning;
  Result result;
};

using Event = std::variant<PrefillEvent, BlockEvent, DoneEvent>;

struct EventSink {
  std::function<void(const Event&)> on_event;  // unset: no events
  std::function<bool()> cancel;                // asked before every denoise step; true ends the generation
};

}  // namespace dg
