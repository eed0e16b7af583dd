#include "serving/stats.h"

#include <algorithm>

namespace dg {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
  std::sort(bounds_.begin(), bounds_.end());
}

void Histogram::observe(double x) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), x) - bounds_.begin());
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[i];
  ++count_;
  sum_ += x;
}

void Histogram::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  std::fill(counts_.begin(), counts_.end(), 0);
  count_ = 0;
  sum_ = 0.0;
}

Histogram::Snapshot Histogram::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  Snapshot s;
  s.bounds = bounds_;
  uint64_t acc = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    acc += counts_[i];
    s.cumulative.push_back(acc);
  }
  s.count = count_;
  s.sum = sum_;
  return s;
}

namespace {

std::vector<double> occupancy_bounds(int max_batch) {
  std::vector<double> b;
  for (int i = 1; i <= std::max(1, max_batch); ++i) b.push_back(i);
  return b;
}

}  // namespace

WorkerStats::WorkerStats(int max_batch)
    : step_seconds({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0}),
      batch_occupancy(occupancy_bounds(max_batch)),
      prefill_prompts(occupancy_bounds(max_batch)),
      prefill_tokens({16, 64, 256, 1024, 2048, 4096, 8192, 16384}) {}

void WorkerStats::reset() {
  for (std::atomic<uint64_t>* c : {&jobs_completed, &jobs_cancelled, &jobs_timed_out, &jobs_failed, &prompt_tokens,
                                   &cached_prompt_tokens, &completion_tokens, &denoise_steps})
    *c = 0;
  for (Histogram* h : {&step_seconds, &batch_occupancy, &prefill_prompts, &prefill_tokens}) h->reset();
}

}  // namespace dg
