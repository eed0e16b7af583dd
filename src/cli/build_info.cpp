#include "cli/build_info.h"

#include <fmt/format.h>

namespace dg::cli {

std::string version_text() {
#if defined(DG_WITH_CUDA)
  const std::string backends = fmt::format("cpu, cuda (CUDA architectures {})", DG_CUDA_ARCHITECTURES);
#else
  const std::string backends = "cpu (built without CUDA)";
#endif
  return fmt::format("diffgemma {}\ncommit    {}\nbackends  {}\nbuild     {}, {}{}", DG_VERSION, kBuildCommit, backends,
                     DG_BUILD_TYPE, DG_COMPILER, DG_SANITIZED ? ", ASan + UBSan" : "");
}

}  // namespace dg::cli
