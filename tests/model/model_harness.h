// Builds the CPU engine for a reference fixture and captures forward traces by name.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/checkpoint.h"
#include "model/forward.h"
#include "support/reference_fixture.h"

namespace dg::test {

struct Engine {
  Checkpoint ck;
  std::unique_ptr<Backend> be;
  std::unique_ptr<Model> model;

  explicit Engine(const std::string& dir, Precision p = {});
  KvCache new_cache() const;
};

struct Capture {
  std::map<std::string, std::vector<float>> t;
  ForwardTrace fn();
};

}  // namespace dg::test
