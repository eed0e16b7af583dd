// The transformers reference fixtures made by scripts/make_fixtures.py: a tiny checkpoint (tests/fixtures/<name>/)
// and its dumps (tests/fixtures/<name>_ref/: dumps_f32/dumps_bf16 layer tensors, traces of recorded generate()
// runs, meta.json describing prompts, seeds and outcomes).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"

namespace dg::test {

struct RefRun {
  std::string name;
  std::vector<int32_t> prompt;
  uint64_t seed = 0;
  int steps = 0, max_new_tokens = 0, stability_threshold = 1;
  double confidence_threshold = 0.005;
  std::vector<int32_t> eos;
  bool has_logits = false;
  std::vector<int32_t> sequence;  // prompt + committed blocks (pad after the first eos), as generate() returned it
  std::vector<int> steps_per_block;
  std::vector<std::vector<double>> T;
  std::vector<std::vector<bool>> stop;
};

struct RefFixture {
  std::string name, ckpt_dir, ref_dir;
  nlohmann::json meta;
  TensorStore dumps_f32, traces;
  std::optional<TensorStore> dumps_bf16;
  std::vector<RefRun> runs;

  static bool available(const std::string& name);
  static RefFixture load(const std::string& name);
};

std::vector<float> read_f32(const TensorStore& s, const std::string& name);
std::vector<int32_t> read_i32(const TensorStore& s, const std::string& name);
std::vector<uint8_t> read_u8(const TensorStore& s, const std::string& name);

// Skips the current test (GTEST_SKIP) when the fixture is missing.
#define DG_REQUIRE_FIXTURE(name)                                                              \
  do {                                                                                        \
    if (!::dg::test::RefFixture::available(name))                                             \
      GTEST_SKIP() << "reference fixture " << (name) << " not present (scripts/make_fixtures.py)"; \
  } while (0)

}  // namespace dg::test
