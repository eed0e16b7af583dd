#include "backend/registry.h"

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#if defined(DG_WITH_CUDA)
#include "backend/cuda/cuda_backend.h"
#endif

namespace dg {

namespace {

// The CPU stores every value as f32 (rounded to the requested precision) but the tempered logits, 16-bit under a
// 16-bit precision (CpuBackend::alloc_tempered); it reads weights where they are mapped.
StorageBytes cpu_bytes(const Precision& p) { return StorageBytes{4, 4, p.act == Storage::kF32 ? 4 : 2, 0}; }
// bf16 activations, tempered logits and unpacked weights, an f16 KV cache (CudaBackend::precision).
StorageBytes cuda_bytes(const Precision&) { return StorageBytes{2, 2, 2, 2}; }

}  // namespace

const std::vector<BackendEntry>& backend_registry() {
  // Batch caps: on the CPU a batched step's time grows with every canvas, so a few keep each stream's steps
  // frequent; a GPU fills its compute with tens of canvases (issue targets: 32 and 64 streams).
  static const std::vector<BackendEntry> entries = {
      {"cpu", nullptr, [] { return true; }, make_cpu_backend, cpu_bytes, 8},
#if defined(DG_WITH_CUDA)
      {"cuda", nullptr, cuda_present, make_cuda_backend, cuda_bytes, 64},
#else
      {"cuda",
       "this diffgemma was built without CUDA: build the 'cuda' preset (cmake --preset cuda) for --backend cuda",
       [] { return false; }, nullptr, cuda_bytes, 64},
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
