// The backends this build can make, in one table (registry.cpp): a name, whether the build has it, whether the
// machine has what it runs on, and its factory. Adding a backend = its folder, one line there and its build switch
// (docs/ARCHITECTURE.md, "Add a backend").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_kernels.h"

namespace dg {

struct BackendOptions {
  Precision precision;  // the CPU reference's storage roundings (a GPU backend has its own, Backend::precision)
  float rms_eps = 1e-6f;
  int device = 0;       // the device index of a GPU backend
  CudaKernels cuda;     // the CUDA backend's kernel choices
  bool linear_act8 = false;  // fp8 linears take fp8 activations: the W8A8 products (--linear-act, linear_act_fp8)
};

// Bytes per stored value of what a backend keeps per sequence, for memory planning without a device
// (serve --plan): activations, the KV cache, and the tempered logits that self-condition the next step.
struct StorageBytes {
  int act = 4, kv = 4, tempered = 4;
  int weight = 0;  // an unpacked weight as uploaded (0: as the checkpoint stores it; packed formats stay packed)
};

struct BackendEntry {
  const char* name;
  const char* missing;  // what to build, where this build lacks it (null: built)
  bool (*present)();       // the machine has what it runs on (a GPU)
  std::unique_ptr<Backend> (*make)(const BackendOptions& o);
  StorageBytes (*bytes)(const Precision& p);  // at the requested precision (a GPU backend has its own)
  int batch_cap;  // most streams `serve` batches by default (docs/SERVER.md, "Memory")
};

// Every known backend, the reference first.
const std::vector<BackendEntry>& backend_registry();
// The entry named `name`; throws dg::Error listing the known names.
const BackendEntry& backend_entry(const std::string& name);
// A backend by name; throws dg::Error when it is unknown, not built, or not present (saying what to do).
std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& o = {});

}  // namespace dg
