// Progress on stderr. Generation: on a terminal a live prefill line (tokens encoded / total, tokens/s) per prompt
// chunk, then a live step line until the first block commits (from then on the streamed answer shows progress), then
// a summary; otherwise (logs) one line per committed block and a summary.
// Byte-counted jobs (quantize): on a terminal a live bar with bytes/s and ETA; otherwise one line per 10%.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "diffusion/generate.h"

namespace dg::cli {

// `fd` is a terminal that takes cursor control (a live progress line): isatty, and TERM is not "dumb".
bool live_terminal(int fd);
// ... that also takes styling (dimmed reasoning): NO_COLOR (no-color.org) unset or empty.
bool color_terminal(int fd);

class GenerationProgress {
 public:
  explicit GenerationProgress(bool quiet, int steps);
  // Whether live lines are drawn (a terminal, not quiet): set a prefill callback only then (it waits for the
  // backend after each chunk).
  bool live() const { return !quiet_ && tty_; }
  void prefill(int64_t done, int64_t total);  // PrefillProgress: the live line, cleared when the prompt is in
  void prompt_encoded(size_t tokens);  // the prompt is in the cache: the generation's clock starts
  void step(const StepInfo& s);
  void block(const BlockInfo& b);
  void done(const GenerateResult& r);  // the prompt and the generation each with its tokens/s, as llama.cpp does

  struct Timing {
    size_t prompt_tokens = 0;
    double prompt_s = 0, generation_s = 0;
  };
  Timing timing() const;  // so far

 private:
  bool quiet_, tty_, live_ = true;
  int steps_;
  std::chrono::steady_clock::time_point start_, encoded_, prefill_start_;
  size_t prompt_tokens_ = 0;
  bool prompt_done_ = false;
};

class ByteProgress {
 public:
  ByteProgress(bool quiet, std::string label);
  void update(uint64_t done, uint64_t total);
  void finish();  // ends the live line

 private:
  bool quiet_, tty_;
  std::string label_;
  int last_decile_ = -1;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace dg::cli
