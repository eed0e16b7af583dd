// How many CPUs this process may actually use: the smallest of the online processors, the scheduler affinity mask
// and the cgroup CPU quota (v2 cpu.max or v1 cfs_quota_us / cfs_period_us, along the process's cgroup path). A
// container limited to 16 CPUs on a 192-thread host reports 192 through std::thread::hardware_concurrency; a pool
// of 192 threads there spends its quota switching between them.
#pragma once

#include <optional>
#include <string_view>

namespace dg {

// At least 1.
int usable_cpus();

// The CPUs a cgroup v2 `cpu.max` line grants ("max 100000" -> none; "400000 100000" -> 4.0), or a v1 quota and
// period pair (quota -1 -> none). Malformed text -> none.
std::optional<double> cpu_max_limit(std::string_view cpu_max);
std::optional<double> cfs_limit(std::string_view quota_us, std::string_view period_us);

}  // namespace dg
