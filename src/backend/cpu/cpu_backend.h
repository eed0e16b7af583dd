// The CPU reference backend (cpu_backend.cpp): every op is the CPU reference of src/ops/, with outputs rounded
// through the configured storage precision. Made through the registry (src/backend/registry.h).
#pragma once

#include <memory>

#include "backend/registry.h"

namespace dg {

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& o);

}  // namespace dg
