// What `diffgemma --version` reports: the version, the commit the binary was built from (a file generated at build
// time by cmake/build_info.cmake), the backends and CUDA architectures compiled in, and the build type.
#pragma once

#include <string>

namespace dg::cli {

extern const char* const kBuildCommit;  // `git describe --always --dirty` of the source tree, or "unknown"

std::string version_text();

}  // namespace dg::cli
