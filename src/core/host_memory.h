// Memory a backend may fill: free and total bytes of the host (the CPU backend; /proc/meminfo's MemAvailable and
// MemTotal) or of a device (the CUDA backend asks the driver). A container's cgroup limit is not read: a server in
// one says what it may use (serve --memory).
#pragma once

#include <cstddef>
#include <string_view>

namespace dg {

struct MemoryInfo {
  size_t free = 0;   // bytes that can be allocated now
  size_t total = 0;  // bytes the host or device has
};

// The host's memory now; zeros where /proc/meminfo cannot be read.
MemoryInfo host_memory();
// MemAvailable and MemTotal of /proc/meminfo text ("MemTotal:  16384 kB" lines); zeros for what is missing.
MemoryInfo parse_meminfo(std::string_view text);

}  // namespace dg
