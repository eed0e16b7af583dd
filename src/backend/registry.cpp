#include "backend/registry.h"

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#if defined(DG_WITH_CUDA)
#include "backend/cuda/cuda_backend.h"
#endif

namespace dg {

const std::vector<BackendEntry>& backend_registry() {
  static const std::vector<BackendEntry> entries = {
      {"cpu", nullptr, [] { return true; }, make_cpu_backend},
#if defined(DG_WITH_CUDA)
      {"cuda", nullptr, cuda_present, make_cuda_backend},
#else
      {"cuda",
       "this diffgemma was built without CUDA: build the 'cuda' preset (cmake --preset cuda) for --backend cuda",
       [] { return false; }, nullptr},
#endif
  };
  return entries;
}

const BackendEntry& backend_entry(const std::string& name) {
  std::string known;
  for (const BackendEntry& e : backend_registry()) {
    if (e.name == name) return e;
    known += (known.empty() ? "" : " or ") + std::string(e.name);
  }
  fail("unknown backend '{}': expected {}", name, known);
}

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& o) {
  const BackendEntry& e = backend_entry(name);
  DG_CHECK(e.make != nullptr, "{}", e.missing);
  return e.make(o);
}

}  // namespace dg
