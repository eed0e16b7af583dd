// generate() with the sampler decisions on the backend (the decide op) against the host decisions, on the tiny
// models: the same tokens, committed blocks and BlockInfo for both profiles and several seeds. On the CPU backend
// (the twin) the forwards are the same code either way; on CUDA the step's forward reads the canvas the decide
// kernel wrote, with and without graphs. The CUDA cases skip without a GPU; the decide kernel itself is checked
// against the twin in tests/ops/decide_cuda_test.cpp.
#include <gtest/gtest.h>

#include <iostream>

#include "diffusion/generate.h"
#include "model/model_harness.h"
#include "support/paths.h"

#if defined(DG_WITH_CUDA)
#include "core/cuda/cuda_check.h"
#endif

namespace dg::test {
namespace device_decisions_test {

SamplerOptions options(const ModelRig& e, SamplerProfile profile, uint64_t seed) {
  SamplerOptions o = make_sampler_options(profile, GenerationConfig{}, 0, 2);
  o.seed = seed;
  o.stop_ids = {1};
  o.max_new_tokens = 3 * static_cast<int>(e.ck.config.canvas);
  o.steps = 12;
  return o;
}

void expect_same(const GenerateResult& a, const GenerateResult& b, const std::string& what) {
  EXPECT_EQ(a.tokens, b.tokens) << what;
  EXPECT_EQ(a.committed, b.committed) << what;
  EXPECT_EQ(a.forwards, b.forwards) << what;
  EXPECT_EQ(a.finish, b.finish) << what;
  ASSERT_EQ(a.blocks.size(), b.blocks.size()) << what;
  for (size_t i = 0; i < a.blocks.size(); ++i) {
    const BlockInfo &x = a.blocks[i], &y = b.blocks[i];
    EXPECT_TRUE(x.block == y.block && x.canvas == y.canvas && x.steps == y.steps && x.forwards == y.forwards &&
                x.stop == y.stop && x.rerolls == y.rerolls && x.kept == y.kept && x.trimmed == y.trimmed &&
                x.pad_gated == y.pad_gated && x.constrained == y.constrained)
        << what << ", block " << i;
  }
}

// Both paths on one engine; returns the number of steps that stopped early (so a run shows it covered stops).
int device_matches_host(ModelRig& e, bool graphs) {
  int early = 0;
  const std::vector<int32_t> prompt = pattern_ids(9, 3, e.ck.config.vocab);
  for (const SamplerProfile profile : {SamplerProfile::kContract, SamplerProfile::kReference}) {
    for (const uint64_t seed : {1u, 7u, 42u}) {
      SamplerOptions o = options(e, profile, seed);
      const std::string what = std::string(sampler_profile_name(profile)) + " seed " + std::to_string(seed);
      GenerateResult r[2];
      for (int device = 0; device < 2; ++device) {
        o.host_decisions = device == 0;
        KvCache kv = e.new_cache();
        ModelDenoiser d(*e.model);
        d.set_graphs(graphs);
        EXPECT_TRUE(d.can_decide());
        r[device] = generate(d, kv, prompt, o);
      }
      expect_same(r[0], r[1], what);
      EXPECT_FALSE(r[1].tokens.empty()) << what;
      for (const BlockInfo& b : r[1].blocks) early += b.stop != StopRule::kNone;
    }
  }
  return early;
}

TEST(DeviceDecisions, CpuTinyFixtureMatchesHost) {
  DG_REQUIRE_FIXTURE("tiny_a");
  ModelRig e(RefFixture::load("tiny_a").ckpt_dir);
  std::cout << "  early stops: " << device_matches_host(e, false) << "\n";
}

TEST(DeviceDecisions, CpuEmbeddedModelMatchesHost) {
  ModelRig e(source_path("models/dg-tiny"));
  std::cout << "  early stops: " << device_matches_host(e, false) << "\n";
}

// Observers that read the rows get them (the host path); observers of StepInfo alone (step_rows false) get the
// same StepInfo sequence from the device decisions, with an empty view.
TEST(DeviceDecisions, StepObserversGetTheSameSteps) {
  ModelRig e(source_path("models/dg-tiny"));
  const SamplerOptions o = options(e, SamplerProfile::kContract, 5);
  const std::vector<int32_t> prompt = pattern_ids(5, 1, e.ck.config.vocab);
  std::vector<StepInfo> steps[2];
  GenerateResult r[2];
  for (int device = 0; device < 2; ++device) {
    GenerateEvents ev;
    ev.step_rows = device == 0;
    ev.on_step = [&, device](const StepInfo& s, const StepView& v) {
      steps[device].push_back(s);
      EXPECT_EQ(v.canvas_out.empty(), device == 1);
      EXPECT_EQ(v.entropy.empty(), device == 1);
    };
    KvCache kv = e.new_cache();
    r[device] = generate(*e.model, kv, prompt, o, &ev);
  }
  expect_same(r[0], r[1], "rows observed vs StepInfo observed");
  ASSERT_EQ(steps[0].size(), steps[1].size());
  EXPECT_EQ(static_cast<int>(steps[1].size()), r[1].forwards);
  for (size_t i = 0; i < steps[0].size(); ++i) {
    const StepInfo &a = steps[0][i], &b = steps[1][i];
    EXPECT_TRUE(a.block == b.block && a.step == b.step && a.temperature == b.temperature &&
                a.mean_entropy == b.mean_entropy && a.accepted == b.accepted && a.stop == b.stop)
        << "step " << i;
  }
}

#if defined(DG_WITH_CUDA)
// The decide kernel (CudaKernels::decide, the default) against the host decisions.
const CudaKernels kDeviceDecide{AttentionKernel::kFlash, MoeKernel::kStream, 2048, DecideMode::kDevice};

TEST(CudaDeviceDecisions, TinyFixtureMatchesHost) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  DG_REQUIRE_FIXTURE("tiny_a");
  ModelRig e(RefFixture::load("tiny_a").ckpt_dir, {}, "cuda", kDeviceDecide);
  for (const bool graphs : {false, true})
    std::cout << "  graphs " << graphs << ", early stops: " << device_matches_host(e, graphs) << "\n";
}

TEST(CudaDeviceDecisions, EmbeddedModelMatchesHost) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  ModelRig e(source_path("models/dg-tiny"), {}, "cuda", kDeviceDecide);
  for (const bool graphs : {false, true})
    std::cout << "  graphs " << graphs << ", early stops: " << device_matches_host(e, graphs) << "\n";
}
#endif

}  // namespace device_decisions_test
}  // namespace dg::test
