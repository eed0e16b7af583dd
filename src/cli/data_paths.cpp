#include "cli/data_paths.h"

#include <filesystem>

namespace dg::cli {
namespace {

namespace fs = std::filesystem;

// `in_source`: the path in a checkout (and in the source tree); `installed`: the path under the install data dir.
std::string data_path(const std::string& in_source, const std::string& installed) {
  std::error_code ec;
  if (fs::exists(in_source, ec)) return in_source;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path p = (exe.parent_path() / DG_DATA_FROM_BIN / installed).lexically_normal();
    if (fs::exists(p, ec)) return p.string();
  }
  const fs::path src = fs::path(DG_SOURCE_DIR) / in_source;
  if (fs::exists(src, ec)) return src.string();
  return in_source;
}

}  // namespace

std::string embedded_model_dir() { return data_path("models/dg-tiny", "models/dg-tiny"); }
std::string smoketest_battery() {
  return data_path("tests/fixtures/smoketest/battery.json", "smoketest/battery.json");
}
std::string programmatic_battery() {
  return data_path("tests/fixtures/programmatic/battery.json", "programmatic/battery.json");
}

}  // namespace dg::cli
