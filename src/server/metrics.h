// /metrics: Prometheus text exposition (version 0.0.4) of the HTTP counters kept here and the worker's
// WorkerStats: requests by route and status, connections, tokens, queue depth, denoise-step latency, batch
// occupancy.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "serving/stats.h"
#include "server/http.h"

namespace dg::server {

class HttpStats {
 public:
  void count(const std::string& route, int status);
  std::map<std::pair<std::string, int>, uint64_t> snapshot() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
};

struct QueueGauges {
  size_t depth = 0, capacity = 0;
  int slots = 0, max_batch = 1;
};

std::string prometheus_text(const HttpStats& http, const WorkerStats& worker, const QueueGauges& q,
                            const HttpCounters& connections);

}  // namespace dg::server
