// Paths the tests read: the source tree (fixtures, models), the build tree, the CLI binary.
#pragma once

#include <string>

namespace dg::test {

inline std::string source_path(const std::string& rel) { return std::string(DG_SOURCE_DIR) + "/" + rel; }
inline std::string binary_path(const std::string& rel) { return std::string(DG_BINARY_DIR) + "/" + rel; }
inline std::string cli_path() { return DG_CLI_PATH; }
// A fresh scratch directory under the build tree, unique per call.
std::string scratch_dir(const std::string& tag);

}  // namespace dg::test
