// Progress on stderr for generation. On a terminal: a live step line until the first block commits (from then on
// the streamed answer shows progress), then a summary. Otherwise (logs): one line per committed block and a summary.
#pragma once

#include <chrono>
#include <cstdio>

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

}  // namespace dg::cli
