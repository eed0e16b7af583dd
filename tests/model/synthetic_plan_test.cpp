// The synthetic model's plan: exactly the text weights the loader expects (names and shapes), drawn in a fixed order
// from consecutive seeds, so synthetic_weights, dg_write_checkpoint and scripts/full_shape_vs_hf.py (its
// engine_plan) agree on every tensor.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "model/synthetic.h"
#include "model/weights.h"

namespace dg {
namespace synthetic_plan_test {

TEST(SyntheticPlan, CoversExactlyTheExpectedTextWeightsWithConsecutiveSeeds) {
  const ModelConfig cfg = diffusiongemma_26b_config(7);
  const std::vector<SyntheticTensor> plan = synthetic_plan(cfg, 5);
  std::map<std::string, Shape> expected;
  for (const WeightEntry& e : expected_weights(cfg))
    if (e.name.find("layer_scalar") == std::string::npos) expected[e.name] = e.shape;
  ASSERT_EQ(plan.size(), expected.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    const SyntheticTensor& t = plan[i];
    ASSERT_TRUE(expected.count(t.name)) << t.name;
    EXPECT_EQ(t.shape, expected[t.name]) << t.name;
    EXPECT_EQ(t.seed, 5 * 1000003ull + 1 + i) << t.name;
  }
  // The order the recipe has always drawn in (scripts/full_shape_vs_hf.py rebuilds it; ctest
  // scripts.full_shape_vs_hf_plan checks that copy).
  EXPECT_EQ(plan[0].name, "model.decoder.embed_tokens.weight");
  EXPECT_EQ(plan[3].name, "model.decoder.self_conditioning.gate_proj.weight");
  EXPECT_EQ(plan[6].name, "model.decoder.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(plan[6 + 20].name, "model.decoder.layers.0.pre_feedforward_layernorm_2.weight");
  EXPECT_EQ(plan[3].kind, SyntheticTensor::Kind::kSelfCondLinear);
  int experts = 0;
  for (const SyntheticTensor& t : plan) experts += t.kind == SyntheticTensor::Kind::kExperts;
  EXPECT_EQ(experts, 2 * 7);
}

}  // namespace synthetic_plan_test
}  // namespace dg
