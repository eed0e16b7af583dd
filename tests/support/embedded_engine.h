// The embedded model (models/dg-tiny) opened once per test binary on the CPU, for the tests that drive the engine.
#pragma once

#include "dg/engine.h"

namespace dg::test {

const Engine& embedded_engine();

}  // namespace dg::test
