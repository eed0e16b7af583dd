#include "core/host_memory.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace dg {
namespace {

// "NAME:   123 kB" -> bytes; 0 when the line is not NAME's.
size_t field_bytes(std::string_view line, std::string_view name) {
  if (line.substr(0, name.size()) != name || line.size() <= name.size() || line[name.size()] != ':') return 0;
  std::string_view rest = line.substr(name.size() + 1);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  size_t v = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
  if (ec != std::errc()) return 0;
  const std::string_view unit = rest.substr(static_cast<size_t>(end - rest.data()));
  return unit.find("kB") != std::string_view::npos ? v * 1024 : v;
}

}  // namespace

MemoryInfo parse_meminfo(std::string_view text) {
  MemoryInfo m;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    if (const size_t b = field_bytes(line, "MemAvailable")) m.free = b;
    if (const size_t b = field_bytes(line, "MemTotal")) m.total = b;
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return m;
}

MemoryInfo host_memory() {
  std::ifstream f("/proc/meminfo");
  if (!f) return {};
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_meminfo(ss.str());
}

}  // namespace dg
