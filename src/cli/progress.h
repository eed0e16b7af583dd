// Progress on stderr. Generation: on a terminal a live step line until the first block commits (from then on the
// streamed answer shows progress), then a summary; otherwise (logs) one line per committed block and a summary.
// Byte-counted jobs (quantize): on a terminal a live bar with bytes/s and ETA; otherwise one line per 10%.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "diffusion/generate.h"

namespace dg::cli {

class GenerationProgress {
 public:
  explicit GenerationProgress(bool quiet, int steps);
  void step(const StepInfo& s);
  void block(const BlockInfo& b);
  void done(const GenerateResult& r);

 private:
  bool quiet_, tty_, live_ = true;
  int steps_;
  std::chrono::steady_clock::time_point start_;
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
