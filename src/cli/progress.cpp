#include "cli/progress.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace dg::cli {

bool live_terminal(int fd) {
  const char* term = std::getenv("TERM");
  return ::isatty(fd) != 0 && (term == nullptr || std::strcmp(term, "dumb") != 0);
}

bool color_terminal(int fd) {
  const char* no_color = std::getenv("NO_COLOR");
  return live_terminal(fd) && (no_color == nullptr || *no_color == '\0');
}

GenerationProgress::GenerationProgress(bool quiet, int steps)
    : quiet_(quiet), tty_(live_terminal(STDERR_FILENO)), steps_(steps), start_(std::chrono::steady_clock::now()) {}

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

void GenerationProgress::prefill(int64_t done, int64_t total) {
  if (!live()) return;
  const auto now = std::chrono::steady_clock::now();
  if (done == 0) prefill_start_ = now;
  if (done >= total) {
    fmt::print(stderr, "\r\033[K");
    std::fflush(stderr);
    return;
  }
  const double s = std::chrono::duration<double>(now - prefill_start_).count();
  fmt::print(stderr, "\r\033[K  prompt {} / {} tokens ({:.0f}%){}", done, total,
             100.0 * static_cast<double>(done) / static_cast<double>(total),
             done > 0 && s > 0 ? fmt::format(" · {:.0f} tokens/s", static_cast<double>(done) / s) : "");
  std::fflush(stderr);
}

void GenerationProgress::prompt_encoded(size_t tokens) {
  if (prompt_done_) return;
  prompt_done_ = true;
  prompt_tokens_ = tokens;
  encoded_ = std::chrono::steady_clock::now();
}

GenerationProgress::Timing GenerationProgress::timing() const {
  const auto now = std::chrono::steady_clock::now();
  const auto split = prompt_done_ ? encoded_ : start_;
  return Timing{prompt_tokens_, std::chrono::duration<double>(split - start_).count(),
                std::chrono::duration<double>(now - split).count()};
}

namespace {

double per_second(double n, double s) { return s > 0 ? n / s : 0.0; }

}  // namespace

void GenerationProgress::done(const GenerateResult& r) {
  if (quiet_) return;
  const Timing t = timing();
  fmt::print(stderr, "  prompt      {:>6} tokens in {:.3f} s ({:.1f} tokens/s)\n", t.prompt_tokens, t.prompt_s,
             per_second(static_cast<double>(t.prompt_tokens), t.prompt_s));
  fmt::print(stderr,
             "  generation  {:>6} tokens in {:.3f} s ({:.1f} tokens/s), {} denoise forwards ({:.2f} tokens/forward), "
             "finish: {}\n",
             r.tokens.size(), t.generation_s, per_second(static_cast<double>(r.tokens.size()), t.generation_s),
             r.forwards, r.forwards ? static_cast<double>(r.committed.size()) / r.forwards : 0.0,
             r.finish == FinishReason::kStop ? "stop token" : "length");
}

}  // namespace dg::cli

namespace dg::cli {

namespace {

std::string bytes_str(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  for (; b >= 1024 && u < 4; ++u) b /= 1024;
  return fmt::format("{:.1f} {}", b, units[u]);
}

std::string clock_str(double s) {
  const auto t = static_cast<long>(s + 0.5);
  return t >= 3600 ? fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60)
                   : fmt::format("{}:{:02}", t / 60, t % 60);
}

}  // namespace

ByteProgress::ByteProgress(bool quiet, std::string label)
    : quiet_(quiet), tty_(live_terminal(STDERR_FILENO)), label_(std::move(label)),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

void ByteProgress::update(uint64_t done, uint64_t total) {
  if (quiet_ || total == 0) return;
  const auto now = std::chrono::steady_clock::now();
  const double s = std::chrono::duration<double>(now - start_).count();
  const double frac = static_cast<double>(done) / static_cast<double>(total);
  const double rate = s > 0 ? static_cast<double>(done) / s : 0.0;
  const std::string eta = rate > 0 ? clock_str(static_cast<double>(total - done) / rate) : "?";
  if (tty_) {
    if (done < total && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    constexpr int kWidth = 30;
    const int fill = static_cast<int>(frac * kWidth);
    fmt::print(stderr, "\r\033[K  {} [{}{}] {:3.0f}% {} / {} · {}/s · ETA {}", label_, std::string(fill, '#'),
               std::string(kWidth - fill, '.'), 100 * frac, bytes_str(static_cast<double>(done)),
               bytes_str(static_cast<double>(total)), bytes_str(rate), eta);
    std::fflush(stderr);
    return;
  }
  const int decile = static_cast<int>(frac * 10);
  if (decile == last_decile_) return;
  last_decile_ = decile;
  fmt::print(stderr, "  {} {:3.0f}% {} / {} · {}/s · ETA {}\n", label_, 100 * frac,
             bytes_str(static_cast<double>(done)), bytes_str(static_cast<double>(total)), bytes_str(rate), eta);
}

void ByteProgress::finish() {
  if (!quiet_ && tty_) fmt::print(stderr, "\r\033[K");
}

}  // namespace dg::cli
