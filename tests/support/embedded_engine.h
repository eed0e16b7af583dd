// The embedded model (models/dg-tiny) opened once per test binary on the CPU, for the tests that drive the engine.
#pragma once

#include "engine/engine_core.h"

namespace dg::test {

const EngineCore& embedded_engine();

}  // namespace dg::test
