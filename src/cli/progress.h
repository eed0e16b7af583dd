// Progress on stderr for generation: a live step line on a terminal, one line per committed block otherwise.
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
  bool quiet_, tty_;
  int steps_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace dg::cli
