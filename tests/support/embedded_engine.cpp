#include "support/embedded_engine.h"

#include <memory>

#include "support/paths.h"

namespace dg::test {

const Engine& embedded_engine() {
  static const std::unique_ptr<Engine> e = [] {
    EngineOptions o;
    o.model_dir = source_path("models/dg-tiny");
    return Engine::open(o);
  }();
  return *e;
}

}  // namespace dg::test
