// Counters the device worker keeps for the server's /metrics: requests finished by outcome, tokens, and two
// histograms (denoise-step latency, batch occupancy per step). Every member is safe to read while the worker
// writes; the server formats them (src/server/metrics.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace dg {

// A Prometheus-style histogram: cumulative counts per upper bound, plus the sum and the count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double x);
  void reset();  // no observations

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // cumulative[i]: observations <= bounds[i]
    uint64_t count = 0;
    double sum = 0.0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative
  uint64_t count_ = 0;
  double sum_ = 0.0;
};

struct WorkerStats {
  explicit WorkerStats(int max_batch);

  std::atomic<uint64_t> jobs_completed{0};  // answered in full (any finish reason)
  std::atomic<uint64_t> jobs_cancelled{0};  // the client went away
  std::atomic<uint64_t> jobs_timed_out{0};
  std::atomic<uint64_t> jobs_failed{0};     // an engine error
  std::atomic<uint64_t> prompt_tokens{0};
  std::atomic<uint64_t> cached_prompt_tokens{0};  // prompt tokens found in a session's cache (not encoded)
  std::atomic<uint64_t> completion_tokens{0};
  std::atomic<uint64_t> denoise_steps{0};
  std::atomic<int> running{0};  // jobs on the worker now
  Histogram step_seconds;       // wall time of one denoise step (of the whole batch)
  Histogram batch_occupancy;    // jobs denoised together in one step
  Histogram prefill_prompts;    // batched worker: prompts with tokens in one encoder pass
  Histogram prefill_tokens;     // batched worker: prompt tokens in one encoder pass (prefill_round_limit)

  // Every counter and histogram but `running` back to zero (what the warm-up added: Worker::warm_up).
  void reset();
};

}  // namespace dg
