// What the CUDA backend reports about the current device: its name, the stream-ordered pool's high-water mark and
// the memory still available. Host code.
#pragma once

#include <cstddef>
#include <string>

#include "core/host_memory.h"

namespace dg {

std::string current_device_name();
// The most the default memory pool and the graphs' memory (captures' memory nodes) have reserved since the process
// started (bytes).
size_t pool_peak_bytes();
// The driver's free memory plus what the default pool holds without using (freed buffers it keeps), and the total.
MemoryInfo device_memory_info();

}  // namespace dg
