// generation_config.json -> GenerationConfig: the flat HF 5.17 keys, the legacy nested spellings, defaults,
// and the reference's validation rules, each failure naming the file and the field.
#include <gtest/gtest.h>

#include "core/error.h"
#include "io/generation_config.h"
#include "support/expect_error.h"
#include "support/paths.h"
#include "support/tiny_checkpoint.h"

namespace dg {
namespace loader_generation_config_test {

using nlohmann::json;

constexpr const char* kSrc = "/ckpt/generation_config.json";

GenerationConfig parse(const json& j) { return parse_generation_config(j.dump(), kSrc); }

TEST(LoaderGenerationConfig, EmptyObjectGivesReferenceDefaults) {
  const GenerationConfig g = parse(json::object());
  EXPECT_EQ(g.max_new_tokens, 256);
  EXPECT_EQ(g.max_denoising_steps, 48);
  EXPECT_DOUBLE_EQ(g.entropy_bound, 0.1);
  EXPECT_DOUBLE_EQ(g.t_min, 0.4);
  EXPECT_DOUBLE_EQ(g.t_max, 0.8);
  EXPECT_EQ(g.stability_threshold, 1);
  EXPECT_DOUBLE_EQ(g.confidence_threshold, 0.005);
  EXPECT_TRUE(g.eos_ids.empty());
  EXPECT_EQ(g.pad_id, -1);
  EXPECT_EQ(g.bos_id, -1);
}

TEST(LoaderGenerationConfig, FlatSpellingIsRead) {
  const json j = {{"max_new_tokens", 512},
                  {"max_denoising_steps", 24},
                  {"sampler_config", {{"_cls_name", "EntropyBoundSamplerConfig"}, {"entropy_bound", 0.25}}},
                  {"t_min", 0.3},
                  {"t_max", 0.9},
                  {"stability_threshold", 2},
                  {"confidence_threshold", 0.01},
                  {"eos_token_id", {1, 106, 50}},
                  {"pad_token_id", 0},
                  {"bos_token_id", 2},
                  {"transformers_version", "5.17.0"},
                  {"some_future_key", {{"x", 1}}}};
  const GenerationConfig g = parse(j);
  EXPECT_EQ(g.max_new_tokens, 512);
  EXPECT_EQ(g.max_denoising_steps, 24);
  EXPECT_DOUBLE_EQ(g.entropy_bound, 0.25);
  EXPECT_DOUBLE_EQ(g.t_min, 0.3);
  EXPECT_DOUBLE_EQ(g.t_max, 0.9);
  EXPECT_EQ(g.stability_threshold, 2);
  EXPECT_DOUBLE_EQ(g.confidence_threshold, 0.01);
  EXPECT_EQ(g.eos_ids, (std::vector<int>{1, 106, 50}));
  EXPECT_EQ(g.pad_id, 0);
  EXPECT_EQ(g.bos_id, 2);
  EXPECT_EQ(parse(json{{"eos_token_id", 106}}).eos_ids, std::vector<int>{106});
}

TEST(LoaderGenerationConfig, LegacyNestedSpellingIsRead) {
  const json j = {{"linear_temperature_schedule_config", {{"t_min", 0.2}, {"t_max", 0.7}}},
                  {"diffusion_stopping_config", {{"confidence_threshold", 0.02}, {"stability_threshold", 3}}}};
  const GenerationConfig g = parse(j);
  EXPECT_DOUBLE_EQ(g.t_min, 0.2);
  EXPECT_DOUBLE_EQ(g.t_max, 0.7);
  EXPECT_DOUBLE_EQ(g.confidence_threshold, 0.02);
  EXPECT_EQ(g.stability_threshold, 3);
  // The flat key wins when both spellings are present.
  json both = j;
  both["t_min"] = 0.1;
  EXPECT_DOUBLE_EQ(parse(both).t_min, 0.1);
  EXPECT_DOUBLE_EQ(parse(both).t_max, 0.7);
}

TEST(LoaderGenerationConfig, MissingFileGivesDefaultsAndFileIsRead) {
  const std::string dir = test::scratch_dir("gen-file");
  EXPECT_EQ(load_generation_config(dir + "/generation_config.json").max_new_tokens, 256);
  test::write_text_file(dir + "/generation_config.json", test::tiny_generation_config_json().dump());
  const GenerationConfig g = load_generation_config(dir + "/generation_config.json");
  EXPECT_EQ(g.max_new_tokens, 16);
  EXPECT_EQ(g.eos_ids, (std::vector<int>{1, 50, 60}));
}

TEST(LoaderGenerationConfig, ReferenceValidationRulesFail) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"sampler_config", {{"entropy_bound", 0}}}}, "entropy_bound"},
      {{{"sampler_config", {{"entropy_bound", -0.5}}}}, "entropy_bound"},
      {{{"sampler_config", {{"_cls_name", "ConfidenceThresholdSamplerConfig"}}}}, "_cls_name"},
      {{{"sampler_config", 0.1}}, "sampler_config"},
      {{{"t_min", 0.8}, {"t_max", 0.8}}, "t_max"},
      {{{"t_min", 0.9}}, "t_max"},
      {{{"t_min", -0.1}}, "t_min"},
      {{{"linear_temperature_schedule_config", {{"t_max", 0.2}}}}, "t_max"},
      {{{"confidence_threshold", 0}}, "confidence_threshold"},
      {{{"diffusion_stopping_config", {{"confidence_threshold", -1}}}}, "confidence_threshold"},
      {{{"stability_threshold", -1}}, "stability_threshold"},
      {{{"stability_threshold", 1.5}}, "stability_threshold"},
      {{{"max_denoising_steps", 0}}, "max_denoising_steps"},
      {{{"max_new_tokens", 0}}, "max_new_tokens"},
      {{{"max_new_tokens", "many"}}, "max_new_tokens"},
      {{{"eos_token_id", {1, "x"}}}, "eos_token_id"},
      {{{"eos_token_id", -1}}, "eos_token_id"},
      {{{"pad_token_id", 1.5}}, "pad_token_id"},
  };
  for (const auto& [j, field] : cases) {
    SCOPED_TRACE(j.dump());
    DG_EXPECT_ERROR(parse(j), kSrc, field);
  }
  DG_EXPECT_ERROR(parse_generation_config("{\"t_min\": ", kSrc), kSrc, "malformed JSON");
  DG_EXPECT_ERROR(parse_generation_config("3", kSrc), kSrc);
}

}  // namespace loader_generation_config_test
}  // namespace dg
