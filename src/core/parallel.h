// parallel_for: splits [0, n) into contiguous chunks over a process-wide worker pool.
// Work is partitioned deterministically, so results never depend on the thread count unless the body
// itself reduces across chunks (none of ours do).
#pragma once

#include <cstdint>
#include <functional>

namespace dg {

// Sets the worker count (0 = usable_cpus(): the affinity mask and cgroup quota, core/cpus.h). Call before the
// first parallel_for.
void set_num_threads(int n);
int num_threads();

// Calls body(begin, end) on disjoint chunks covering [0, n); grain is the minimum chunk size.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

}  // namespace dg
