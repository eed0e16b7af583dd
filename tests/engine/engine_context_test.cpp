// A one-shot generation (`ask`) sizes its KV cache to its prompt, answer budget and last canvas, past
// EngineOptions::context: a device cache is allocated up front and does not grow, so a prompt longer than the
// engine's context must still run there (the host cache grows either way).
#include <gtest/gtest.h>

#include <vector>

#include "engine/engine_core.h"
#include "support/embedded_copy.h"

#if defined(DG_WITH_CUDA)
#include "core/cuda/cuda_check.h"
#endif

namespace dg {
namespace engine_context_test {

class EngineContext : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineContext, AOneShotPromptLongerThanTheContextRuns) {
  const std::string backend = GetParam();
#if defined(DG_WITH_CUDA)
  if (backend == "cuda" && cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
#else
  if (backend == "cuda") GTEST_SKIP() << "a build without CUDA";
#endif
  EngineOptions eo;
  eo.model_dir = test::embedded_model_with_positions(1024);
  eo.backend = backend;
  eo.context = 64;
  eo.prefill_chunk = 128;
  const auto engine = EngineCore::open(eo);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 300; ++i) prompt.push_back(3 + (i * 37) % 500);
  SamplerOptions opt = engine->default_sampler(SamplerProfile::kContract);
  opt.steps = 2;
  opt.max_new_tokens = 40;
  const GenerateResult r = engine->generate(prompt, opt);
  EXPECT_GT(r.tokens.size(), 0u);
  EXPECT_LE(r.tokens.size(), 40u);
}

INSTANTIATE_TEST_SUITE_P(Backends, EngineContext, ::testing::Values("cpu", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string s = i.param;
                           s[0] = static_cast<char>(s[0] - 'a' + 'A');
                           return s;
                         });

}  // namespace engine_context_test
}  // namespace dg
