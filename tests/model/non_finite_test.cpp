// Non-finite weights never turn into silent garbage: `--check-tensors` (check_weights_finite) names the tensor, its
// file and the first bad element, of a float checkpoint and of a pack (as a packed weight decodes); without the
// check, the first denoising step whose logits are not finite ends the generation with an error, on the host and
// on the backend's decision path, and through the CLI.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "engine/engine_core.h"
#include "model/integrity.h"
#include "quant/pack_manifest.h"
#include "quant/quant_test_util.h"
#include "support/expect_error.h"
#include "support/paths.h"
#include "support/process.h"
#include "support/tiny_checkpoint.h"

namespace dg {
namespace non_finite_test {

constexpr const char* kBadTensor = "model.decoder.layers.1.self_attn.q_proj.weight";

// A tiny checkpoint whose q_proj of layer 1 holds a NaN at element 5.
const std::string& nan_checkpoint() {
  static const std::string dir = [] {
    auto tensors = test::tiny_tensors(test::tiny_model_config());
    for (auto& [name, t] : tensors)
      if (name == kBadTensor) t.f32()[5] = std::numeric_limits<float>::quiet_NaN();
    const std::string d = test::scratch_dir("nan-weights");
    test::write_checkpoint(d, test::tiny_config_json(), tensors);
    return d;
  }();
  return dir;
}

TEST(NonFinite, CheckTensorsNamesTheTensorFileAndElement) {
  const Checkpoint ck = Checkpoint::open(nan_checkpoint());  // the structure is fine
  DG_EXPECT_ERROR(check_weights_finite(ck), kBadTensor, "model.safetensors", "non-finite value (nan)",
                  "element 5 (row 0, column 5)");
  EngineOptions eo;
  eo.model_dir = nan_checkpoint();
  eo.check_tensors = true;
  DG_EXPECT_ERROR(EngineCore::open(eo), kBadTensor, "element 5");
  const Checkpoint clean = Checkpoint::open(test::make_tiny_checkpoint("finite-weights"));
  EXPECT_GT(check_weights_finite(clean), 10000);
}

TEST(NonFinite, APackedWeightIsCheckedAsItDecodes) {
  // fp8 (E4M3) code 0x7f is NaN: one code of the first packed tensor's first row.
  const std::string base = test::quantize_fixture("nan-pack", test::source_path("tests/fixtures/tiny_a"), "fp8");
  std::string name;
  uint64_t offset = 0;
  const std::string pack = test::edited_pack(base, [&](nlohmann::json& j) {
    for (const nlohmann::json& t : j["tensors"])
      if (t["format"] == "fp8") {
        name = t["name"];
        offset = t["offset"];
        break;
      }
  });
  ASSERT_FALSE(name.empty());
  std::vector<uint8_t> blob = test::read_bytes(pack + "/" + kPackBlobFile);
  blob[offset + 3] = 0x7f;
  test::write_bytes(pack + "/" + kPackBlobFile, blob);
  DG_EXPECT_ERROR(check_weights_finite(Checkpoint::open(pack)), name, kPackBlobFile, "element 3 (row 0, column 3)");
}

TEST(NonFinite, NonFiniteLogitsEndTheGenerationWithAnError) {
  EngineOptions eo;
  eo.model_dir = nan_checkpoint();
  const auto engine = EngineCore::open(eo);
  for (const bool host : {true, false}) {
    SamplerOptions so = engine->default_sampler(SamplerProfile::kContract);
    so.host_decisions = host;
    DG_EXPECT_ERROR(engine->generate(std::vector<int32_t>{2, 5, 9}, so), "logits are not finite", "block 1",
                    "denoising step 1", "--check-tensors");
  }
}

TEST(NonFinite, TheCliRefusesTheCheckpoint) {
  const std::string ask = test::cli_path() + " ask -m " + nan_checkpoint() + " --prompt-ids 2,5,9 -q --steps 2";
  const test::ProcessResult checked = test::run_command(ask + " --check-tensors", true);
  EXPECT_EQ(checked.code, 1) << checked.out;
  EXPECT_NE(checked.out.find(kBadTensor), std::string::npos) << checked.out;
  const test::ProcessResult run = test::run_command(ask, true);
  EXPECT_EQ(run.code, 1) << run.out;
  EXPECT_NE(run.out.find("logits are not finite"), std::string::npos) << run.out;
  // A synthetic model has no files to check: asking to is an error, not a silent pass.
  const test::ProcessResult synthetic = test::run_command(
      test::cli_path() + " ask -m synthetic:26b-a4b --prompt-ids 2,5 -q --steps 1 --check-tensors", true);
  EXPECT_EQ(synthetic.code, 1) << synthetic.out;
  EXPECT_NE(synthetic.out.find("'synthetic:26b-a4b' has none"), std::string::npos) << synthetic.out;
}

}  // namespace non_finite_test
}  // namespace dg
