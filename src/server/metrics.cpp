#include "server/metrics.h"

#include <fmt/format.h>

namespace dg::server {

void HttpStats::count(const std::string& route, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{route, status}];
}

std::map<std::pair<std::string, int>, uint64_t> HttpStats::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

namespace {

void metric(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void histogram(std::string& out, const char* name, const char* help, const Histogram& h) {
  metric(out, name, "histogram", help);
  const Histogram::Snapshot s = h.snapshot();
  for (size_t i = 0; i < s.bounds.size(); ++i)
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, s.bounds[i], s.cumulative[i]);
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, s.count, name, s.sum, name,
                     s.count);
}

template <typename T>
void single(std::string& out, const char* name, const char* type, const char* help, T value) {
  metric(out, name, type, help);
  out += fmt::format("{} {}\n", name, value);
}

}  // namespace

std::string prometheus_text(const HttpStats& http, const WorkerStats& w, const QueueGauges& q,
                            const HttpCounters& c) {
  std::string out;
  metric(out, "diffgemma_http_requests_total", "counter", "HTTP requests answered, by route and status");
  for (const auto& [key, n] : http.snapshot())
    out += fmt::format("diffgemma_http_requests_total{{route=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, n);
  single(out, "diffgemma_http_connections", "gauge", "open client connections", c.open.load());
  single(out, "diffgemma_http_connections_accepted_total", "counter", "client connections accepted", c.accepted.load());
  metric(out, "diffgemma_http_connections_closed_total", "counter",
         "connections the server closed early: evicted (to make room), refused (at the bound, all busy), timed_out "
         "(a request head or body not received in time, or a write not taken)");
  out += fmt::format("diffgemma_http_connections_closed_total{{reason=\"evicted\"}} {}\n", c.evicted.load());
  out += fmt::format("diffgemma_http_connections_closed_total{{reason=\"refused\"}} {}\n", c.refused.load());
  out += fmt::format("diffgemma_http_connections_closed_total{{reason=\"timed_out\"}} {}\n", c.timed_out.load());
  metric(out, "diffgemma_jobs_total", "counter", "generation jobs by outcome");
  out += fmt::format("diffgemma_jobs_total{{outcome=\"completed\"}} {}\n", w.jobs_completed.load());
  out += fmt::format("diffgemma_jobs_total{{outcome=\"cancelled\"}} {}\n", w.jobs_cancelled.load());
  out += fmt::format("diffgemma_jobs_total{{outcome=\"timed_out\"}} {}\n", w.jobs_timed_out.load());
  out += fmt::format("diffgemma_jobs_total{{outcome=\"failed\"}} {}\n", w.jobs_failed.load());
  single(out, "diffgemma_prompt_tokens_total", "counter", "prompt tokens of completed jobs", w.prompt_tokens.load());
  single(out, "diffgemma_prompt_tokens_cached_total", "counter",
         "prompt tokens found in a session's KV cache (not prefilled again)", w.cached_prompt_tokens.load());
  single(out, "diffgemma_completion_tokens_total", "counter", "answer tokens of completed jobs",
         w.completion_tokens.load());
  single(out, "diffgemma_denoise_steps_total", "counter", "denoise steps run", w.denoise_steps.load());
  single(out, "diffgemma_queue_depth", "gauge", "requests waiting for the worker", q.depth);
  single(out, "diffgemma_queue_capacity", "gauge", "waiting requests beyond which new ones get 429", q.capacity);
  single(out, "diffgemma_jobs_running", "gauge", "jobs on the device worker", w.running.load());
  single(out, "diffgemma_session_slots", "gauge", "resident sessions (KV caches) for prefix reuse", q.slots);
  single(out, "diffgemma_max_batch", "gauge", "jobs the worker may denoise together", q.max_batch);
  histogram(out, "diffgemma_step_seconds", "wall time of one denoise step", w.step_seconds);
  histogram(out, "diffgemma_batch_occupancy", "jobs denoised together in one step", w.batch_occupancy);
  histogram(out, "diffgemma_prefill_prompts", "prompts encoded together in one encoder pass", w.prefill_prompts);
  histogram(out, "diffgemma_prefill_tokens", "prompt tokens in one encoder pass", w.prefill_tokens);
  return out;
}

}  // namespace dg::server
