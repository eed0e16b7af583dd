#include "cli/progress.h"

#include <unistd.h>

#include <fmt/format.h>

namespace dg::cli {

GenerationProgress::GenerationProgress(bool quiet, int steps)
    : quiet_(quiet), tty_(::isatty(STDERR_FILENO) != 0), steps_(steps), start_(std::chrono::steady_clock::now()) {}

void GenerationProgress::step(const StepInfo& s) {
  if (quiet_ || !tty_ || !live_) return;
  fmt::print(stderr, "\r\033[K  block {} · step {}/{} · T {:.3f} · mean entropy {:.3f} · accepted {}", s.block + 1,
             s.step, steps_, s.temperature, s.mean_entropy, s.accepted);
  std::fflush(stderr);
}

void GenerationProgress::block(const BlockInfo& b) {
  if (quiet_) return;
  if (tty_) {
    if (live_) fmt::print(stderr, "\r\033[K");
    live_ = false;
    return;
  }
  fmt::print(stderr, "  block {}: {} steps ({}), {} tokens committed{}{}\n", b.block + 1, b.steps,
             stop_rule_name(b.stop), b.kept, b.trimmed ? " (confidence trim)" : "",
             b.rerolls ? fmt::format(" after {} re-roll(s)", b.rerolls) : "");
}

void GenerationProgress::done(const GenerateResult& r) {
  if (quiet_) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  fmt::print(stderr, "  {} tokens in {:.2f} s, {} denoise forwards ({:.2f} tokens/forward), finish: {}\n",
             r.tokens.size(), s, r.forwards, r.forwards ? static_cast<double>(r.committed.size()) / r.forwards : 0.0,
             r.finish == FinishReason::kStop ? "stop token" : "length");
}

}  // namespace dg::cli
