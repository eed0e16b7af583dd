#include "core/cpus.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace dg {
namespace {

std::optional<double> number(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return static_cast<double>(v);
}

std::optional<double> ratio(std::optional<double> quota, std::optional<double> period) {
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
  return *quota / *period;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return {};
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void take_min(std::optional<double>& best, std::optional<double> v) {
  if (v && (!best || *v < *best)) best = v;
}

// The tightest quota along `rel` (a cgroup path) and its ancestors under `mount`, read by `limit_at(dir)`.
template <class LimitAt>
void walk_up(const std::string& mount, std::string rel, std::optional<double>& best, LimitAt limit_at) {
  for (;;) {
    take_min(best, limit_at(mount + rel));
    if (rel.empty() || rel == "/") return;
    const size_t slash = rel.find_last_of('/');
    rel = slash == std::string::npos ? std::string() : rel.substr(0, slash);
  }
}

std::optional<double> cgroup_limit() {
  std::optional<double> best;
  std::istringstream lines(read_file("/proc/self/cgroup"));
  for (std::string line; std::getline(lines, line);) {
    // "0::/path" (v2) or "N:cpu,cpuacct:/path" (v1)
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), rel = line.substr(b + 1);
    if (controllers.empty()) {
      walk_up("/sys/fs/cgroup", rel, best, [](const std::string& dir) {
        return cpu_max_limit(read_file(dir + "/cpu.max"));
      });
    } else if (("," + controllers + ",").find(",cpu,") != std::string::npos) {
      for (const char* mount : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"})
        walk_up(mount, rel, best, [](const std::string& dir) {
          return cfs_limit(read_file(dir + "/cpu.cfs_quota_us"), read_file(dir + "/cpu.cfs_period_us"));
        });
    }
  }
  return best;
}

}  // namespace

std::optional<double> cpu_max_limit(std::string_view cpu_max) {
  const size_t sp = cpu_max.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  return ratio(number(cpu_max.substr(0, sp)), number(cpu_max.substr(sp + 1)));
}

std::optional<double> cfs_limit(std::string_view quota_us, std::string_view period_us) {
  return ratio(number(quota_us), number(period_us));
}

int usable_cpus() {
  int n = static_cast<int>(std::thread::hardware_concurrency());
  if (n <= 0) n = 1;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) n = std::min(n, std::max(1, CPU_COUNT(&set)));
  if (const std::optional<double> quota = cgroup_limit())
    n = std::min(n, std::max(1, static_cast<int>(std::ceil(*quota - 1e-9))));
  return n;
}

}  // namespace dg
