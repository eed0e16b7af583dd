#include "support/paths.h"

#include <atomic>
#include <filesystem>

#include <unistd.h>

#include <fmt/format.h>

namespace dg::test {

std::string scratch_dir(const std::string& tag) {
  static std::atomic<int> counter{0};
  const auto dir = std::filesystem::path(DG_BINARY_DIR) / "test-scratch" /
                   fmt::format("{}-{}-{}", tag, ::getpid(), counter.fetch_add(1));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace dg::test
