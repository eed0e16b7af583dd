// max_position_embeddings bounds every position the model is run at: a prompt beyond it is an error naming the
// field, an answer is cut (finish "length") so that its last canvas still fits, and the forward refuses positions
// past it on every other path (a session's sync). Batched requests are bounded when they join the batch, so one
// request near the limit never fails the others' step.
#include <gtest/gtest.h>

#include "diffusion/batch.h"
#include "engine/engine_core.h"
#include "support/expect_error.h"
#include "support/paths.h"
#include "support/tiny_checkpoint.h"

namespace dg {
namespace max_positions_test {

TEST(MaxPositions, APromptBeyondThemIsAnErrorAndAnAnswerStopsBeforeThem) {
  nlohmann::json cfg = test::tiny_config_json();
  cfg["text_config"]["max_position_embeddings"] = 40;  // canvas 8
  const std::string dir = test::scratch_dir("max-positions");
  test::write_checkpoint(dir, cfg, test::tiny_tensors(test::tiny_model_config()));
  EngineOptions eo;
  eo.model_dir = dir;
  const auto engine = EngineCore::open(eo);
  ASSERT_EQ(engine->config().max_positions, 40);
  const SamplerOptions so = fixed_step_options(2, 100);  // no stop ids: only the length ends it

  DG_EXPECT_ERROR(engine->generate(std::vector<int32_t>(41, 3), so), "41 tokens", "40 positions",
                  "max_position_embeddings");
  DG_EXPECT_ERROR(engine->generate(std::vector<int32_t>(33, 3), so), "33 tokens", "8-token canvas",
                  "max_position_embeddings");
  // 30 + 3 answer tokens: the answer's canvas starts at 30 and ends at 38 <= 40.
  const GenerateResult r = engine->generate(std::vector<int32_t>(30, 3), so);
  EXPECT_EQ(r.tokens.size(), 3u);
  EXPECT_EQ(r.finish, FinishReason::kLength);
  const GenerateResult fits = engine->generate(std::vector<int32_t>(32, 3), so);  // one canvas: [32, 40)
  EXPECT_EQ(fits.tokens.size(), 1u);

  Session s = engine->open_session();
  DG_EXPECT_ERROR(s.sync(std::vector<int32_t>(41, 3)), "position 41", "40 positions", "max_position_embeddings");

  // Batched: the request near the limit is cut as it is alone; the one beyond it is refused as it is added.
  ModelBatchDenoiser d(engine->model());
  KvCache near = engine->new_cache(), other = engine->new_cache(), beyond = engine->new_cache();
  std::vector<BatchJob> jobs = {{&near, std::vector<int32_t>(30, 3), so, nullptr},
                                {&other, std::vector<int32_t>(5, 3), fixed_step_options(2, 16), nullptr}};
  const std::vector<GenerateResult> got = generate_batch(d, jobs);
  EXPECT_EQ(got[0].tokens.size(), 3u);
  EXPECT_EQ(got[0].finish, FinishReason::kLength);
  EXPECT_EQ(got[1].tokens.size(), 16u);
  BatchRunner runner(d, BatchOptions{});
  const std::vector<int32_t> long_prompt(33, 3);
  DG_EXPECT_ERROR(runner.add(beyond, long_prompt, so), "33 tokens", "max_position_embeddings");
}

}  // namespace max_positions_test
}  // namespace dg
