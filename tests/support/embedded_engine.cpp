#include "support/embedded_engine.h"

#include <memory>

#include "support/paths.h"

namespace dg::test {

const EngineCore& embedded_engine() {
  static const std::unique_ptr<EngineCore> e = [] {
    EngineOptions o;
    o.model_dir = source_path("models/dg-tiny");
    return EngineCore::open(o);
  }();
  return *e;
}

}  // namespace dg::test
