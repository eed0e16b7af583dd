// Checkpoint::open on tiny synthetic checkpoints: single-file, sharded, both config spellings, tolerated extra
// tensors, the weight table against SPEC §1.2 counts, and one dg::Error naming the file or tensor per bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/error.h"
#include "model/checkpoint.h"
#include "support/expect_error.h"
#include "support/paths.h"
#include "support/tiny_checkpoint.h"

namespace dg {
namespace loader_checkpoint_test {

using nlohmann::json;
using test::TinyOptions;

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype == b.dtype && a.shape == b.shape && std::memcmp(a.data, b.data, a.nbytes()) == 0;
}

TEST(LoaderCheckpoint, SingleFileCheckpointBindsEveryWeight) {
  const TinyOptions o;
  const std::string dir = test::make_tiny_checkpoint("ck-single", o);
  const Checkpoint c = Checkpoint::open(dir);
  EXPECT_EQ(c.dir, dir);
  EXPECT_EQ(c.config.n_layers, 3);
  EXPECT_EQ(c.generation.eos_ids, (std::vector<int>{1, 50, 60}));
  EXPECT_EQ(c.generation.max_new_tokens, 16);
  const ModelWeights& w = c.weights;
  EXPECT_EQ(w.dtype, DType::kF32);
  EXPECT_EQ(w.embed.shape, (Shape{64, 16}));
  EXPECT_EQ(w.sc_gate.shape, (Shape{24, 16}));
  EXPECT_EQ(w.sc_down.shape, (Shape{16, 24}));
  ASSERT_EQ(w.layers.size(), 3u);
  EXPECT_EQ(w.layers[0].q.shape, (Shape{16, 16}));
  EXPECT_EQ(w.layers[0].v.shape, (Shape{8, 16}));
  EXPECT_TRUE(w.layers[2].v.empty()) << "full layers have no v_proj";
  EXPECT_EQ(w.layers[2].q.shape, (Shape{32, 16}));
  EXPECT_EQ(w.layers[2].o.shape, (Shape{16, 32}));
  EXPECT_EQ(w.layers[2].k_norm.shape, (Shape{16}));
  EXPECT_EQ(w.layers[1].experts_gate_up.shape, (Shape{4, 16, 16}));
  EXPECT_EQ(w.layers[1].experts_down.shape, (Shape{4, 16, 8}));

  // Bound views hold exactly the bytes that were written, and the scalars their values.
  const auto written = test::tiny_tensors(c.config, o);
  std::map<std::string, Tensor> by_name(written.begin(), written.end());
  EXPECT_TRUE(same_bytes(w.embed, by_name.at("model.decoder.embed_tokens.weight")));
  EXPECT_TRUE(same_bytes(w.layers[2].experts_down, by_name.at("model.decoder.layers.2.experts.down_proj")));
  EXPECT_TRUE(
      same_bytes(w.layers[1].pre_ff_norm_2, by_name.at("model.decoder.layers.1.pre_feedforward_layernorm_2.weight")));
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(w.layers[i].decoder_scalar, by_name.at(fmt::format("model.decoder.layers.{}.layer_scalar", i)).f32()[0]);
    EXPECT_EQ(w.layers[i].encoder_scalar,
              by_name.at(fmt::format("model.encoder.language_model.layers.{}.layer_scalar", i)).f32()[0]);
    EXPECT_NE(w.layers[i].decoder_scalar, w.layers[i].encoder_scalar);
  }
}

TEST(LoaderCheckpoint, ShardedCheckpointMatchesSingleFile) {
  TinyOptions sharded;
  sharded.sharded = true;
  const Checkpoint a = Checkpoint::open(test::make_tiny_checkpoint("ck-a"));
  const Checkpoint b = Checkpoint::open(test::make_tiny_checkpoint("ck-b", sharded));
  EXPECT_EQ(b.store.files().size(), 2u);
  EXPECT_TRUE(same_bytes(a.weights.embed, b.weights.embed));
  EXPECT_TRUE(same_bytes(a.weights.sc_down, b.weights.sc_down));
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(same_bytes(a.weights.layers[i].experts_gate_up, b.weights.layers[i].experts_gate_up));
    EXPECT_EQ(a.weights.layers[i].encoder_scalar, b.weights.layers[i].encoder_scalar);
  }
}

TEST(LoaderCheckpoint, HalfPrecisionAndGlobalSpellingLoad) {
  for (DType dt : {DType::kBF16, DType::kF16}) {
    TinyOptions o;
    o.dtype = dt;
    o.global_head_dim_style = true;
    const Checkpoint c = Checkpoint::open(test::make_tiny_checkpoint("ck-half", o));
    EXPECT_EQ(c.weights.dtype, dt);
    EXPECT_EQ(c.weights.layers[2].q.shape, (Shape{32, 16}));
    EXPECT_GT(c.weights.layers[0].decoder_scalar, 1.0f);  // drawn in [1.1, 1.4), read through the codec
    EXPECT_LT(c.weights.layers[0].encoder_scalar, 1.0f);  // drawn in [0.6, 0.9)
  }
}

TEST(LoaderCheckpoint, VisionLmHeadAndEncoderCopiesAreIgnoredSilently) {
  TinyOptions o;
  o.with_vision = o.with_lm_head = o.with_encoder_copies = true;
  const std::string dir = test::make_tiny_checkpoint("ck-extras", o);
  testing::internal::CaptureStderr();
  const Checkpoint c = Checkpoint::open(dir);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "") << "tolerated tensors must not produce warnings";
  EXPECT_TRUE(c.store.has("lm_head.weight"));
  EXPECT_TRUE(c.store.has("model.encoder.embed_vision.embedding_projection.weight"));
  EXPECT_EQ(c.weights.layers.size(), 3u);
}

TEST(LoaderCheckpoint, UnknownTensorsGiveOneWarningLine) {
  const TinyOptions o;
  const ModelConfig cfg = test::tiny_model_config(o);
  auto tensors = test::tiny_tensors(cfg, o);
  for (int i = 0; i < 7; ++i) tensors.emplace_back(fmt::format("model.mystery.{}", i), host_tensor(DType::kF32, {2}));
  tensors.emplace_back("model.decoder.layers.9.layer_scalar", host_tensor(DType::kF32, {1}));  // beyond n_layers
  const std::string dir = test::scratch_dir("ck-unknown");
  test::write_checkpoint(dir, test::tiny_config_json(o), tensors, o);
  testing::internal::CaptureStderr();
  (void)Checkpoint::open(dir);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("8 unrecognised"), std::string::npos) << err;
  EXPECT_NE(err.find("model.decoder.layers.9.layer_scalar"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

TEST(LoaderCheckpoint, MissingGenerationConfigTakesIdsFromConfig) {
  TinyOptions o;
  o.with_generation_config = false;
  testing::internal::CaptureStderr();
  const Checkpoint c = Checkpoint::open(test::make_tiny_checkpoint("ck-nogen", o));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(c.generation.eos_ids, std::vector<int>{1});
  EXPECT_EQ(c.generation.pad_id, 0);
  EXPECT_EQ(c.generation.bos_id, 2);
  EXPECT_EQ(c.generation.max_denoising_steps, 48);
  EXPECT_NE(err.find("warning: checkpoint '"), std::string::npos) << err;
  EXPECT_NE(err.find("has no generation_config.json"), std::string::npos) << err;
  EXPECT_NE(err.find("eos ids [1]"), std::string::npos) << err;
}

TEST(LoaderCheckpoint, ConfigEosListStopsWhenTheGenerationConfigNamesNone) {
  // config.json's eos_token_id list is kept whole: without generation_config.json, or with null ids in it, every
  // one of them stops generation (with a warning), instead of no stop token at all.
  TinyOptions o;
  o.with_generation_config = false;
  json cfg = test::tiny_config_json(o);
  cfg["text_config"]["eos_token_id"] = {1, 50};
  const std::string missing = test::scratch_dir("ck-eos-list");
  test::write_checkpoint(missing, cfg, test::tiny_tensors(test::tiny_model_config(o), o), o);
  testing::internal::CaptureStderr();
  EXPECT_EQ(Checkpoint::open(missing).generation.eos_ids, (std::vector<int>{1, 50}));
  EXPECT_NE(testing::internal::GetCapturedStderr().find("eos ids [1, 50]"), std::string::npos);

  const std::string nulls = test::scratch_dir("ck-eos-null");
  test::write_checkpoint(nulls, cfg, test::tiny_tensors(test::tiny_model_config(o), o), o);
  json gen = test::tiny_generation_config_json();
  gen["eos_token_id"] = nullptr;
  gen["pad_token_id"] = nullptr;
  gen["bos_token_id"] = nullptr;
  test::write_text_file(nulls + "/generation_config.json", gen.dump());
  testing::internal::CaptureStderr();
  const Checkpoint c = Checkpoint::open(nulls);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(c.generation.eos_ids, (std::vector<int>{1, 50}));
  EXPECT_EQ(c.generation.pad_id, 0);
  EXPECT_EQ(c.generation.bos_id, 2);
  EXPECT_NE(err.find("generation_config.json names no eos_token_id; stopping on config.json's [1, 50]"),
            std::string::npos)
      << err;
}

TEST(LoaderCheckpoint, MovedCheckpointKeepsWeightsValid) {
  Checkpoint a = Checkpoint::open(test::make_tiny_checkpoint("ck-move"));
  const std::vector<float> before(a.weights.embed.f32(), a.weights.embed.f32() + 16);
  Checkpoint b = std::move(a);
  a = Checkpoint{};
  EXPECT_EQ(std::vector<float>(b.weights.embed.f32(), b.weights.embed.f32() + 16), before);
}

TEST(LoaderCheckpoint, ClassifiesTensorNames) {
  EXPECT_EQ(classify_tensor_name("model.decoder.embed_tokens.weight"), TensorRole::kText);
  EXPECT_EQ(classify_tensor_name("model.decoder.layers.12.experts.gate_up_proj"), TensorRole::kText);
  EXPECT_EQ(classify_tensor_name("model.decoder.self_conditioning.pre_norm.weight"), TensorRole::kText);
  EXPECT_EQ(classify_tensor_name("model.encoder.language_model.layers.3.layer_scalar"), TensorRole::kText);
  EXPECT_EQ(classify_tensor_name("model.encoder.language_model.layers.3.self_attn.q_proj.weight"),
            TensorRole::kIgnoredCopy);
  EXPECT_EQ(classify_tensor_name("model.encoder.language_model.embed_tokens.weight"), TensorRole::kIgnoredCopy);
  EXPECT_EQ(classify_tensor_name("lm_head.weight"), TensorRole::kIgnoredCopy);
  EXPECT_EQ(classify_tensor_name("model.encoder.vision_tower.encoder.layers.0.mlp.up_proj.weight"),
            TensorRole::kVision);
  EXPECT_EQ(classify_tensor_name("model.encoder.embed_vision.embedding_projection.weight"), TensorRole::kVision);
  EXPECT_EQ(classify_tensor_name("model.decoder.layers.1.self_attn.v_norm.weight"), TensorRole::kUnknown);
  EXPECT_EQ(classify_tensor_name("model.decoder.layers.x.layer_scalar"), TensorRole::kUnknown);
  EXPECT_EQ(classify_tensor_name("model.decoder.rotary_emb.inv_freq"), TensorRole::kUnknown);
}

// The released model's structure (SPEC §1.1 real values), in the global_* spelling.
json real_config() {
  json j = test::tiny_config_json(TinyOptions{.global_head_dim_style = true});
  json& t = j["text_config"];
  t["vocab_size"] = 262144;
  t["hidden_size"] = 2816;
  t["intermediate_size"] = 2112;
  t["moe_intermediate_size"] = 704;
  t["num_hidden_layers"] = 30;
  t["num_attention_heads"] = 16;
  t["num_key_value_heads"] = 8;
  t["head_dim"] = 256;
  t["global_head_dim"] = 512;
  t["num_global_key_value_heads"] = 2;
  t["num_experts"] = 128;
  t["top_k_experts"] = 8;
  t["sliding_window"] = 1024;
  t.erase("layer_types");
  j["canvas_length"] = 256;
  return j;
}

TEST(LoaderCheckpoint, WeightTableMatchesSpecCounts) {
  const ModelConfig tiny = test::tiny_model_config();
  EXPECT_EQ(expected_weights(tiny).size(), 22u + 22u + 21u + 1 + 1 + 4 + 3);
  const ModelConfig real = parse_model_config(real_config().dump(), "real config.json");
  EXPECT_EQ(real.n_full_layers(), 5);
  const auto table = expected_weights(real);
  EXPECT_EQ(table.size(), 691u);  // SPEC §1.2
  int64_t numel = 0;
  for (const WeightEntry& e : table)
    if (e.name.find("layer_scalar") == std::string::npos) numel += e.shape.numel();
  const ParamCounts p = count_params(real);
  EXPECT_EQ(p.total(), numel);
  EXPECT_EQ(p.embed, int64_t{262144} * 2816);
  EXPECT_NEAR(static_cast<double>(p.total()) / 1e9, 25.25, 0.01);  // SPEC §1.2: ≈ 25.25 B
  EXPECT_NEAR(static_cast<double>(p.experts) / 30 / 1e6, 761.3, 0.1);
  EXPECT_EQ(count_params(tiny).total(), [&] {
    int64_t n = 0;
    for (const WeightEntry& e : expected_weights(tiny))
      if (e.name.find("layer_scalar") == std::string::npos) n += e.shape.numel();
    return n;
  }());
}

// Checkpoints saved by transformers 5.17 (tests/fixtures, made by scripts/make_fixtures.py on the GPU machine):
// every tensor is either bound or recognised as vision, and the hand-written global_* config spelling beside each
// resolves exactly like the per_layer_config that HF wrote.
TEST(LoaderCheckpoint, TransformersSavedFixturesLoadCleanly) {
  int found = 0;
  for (const char* name : {"tiny_a", "tiny_b"}) {
    const std::string dir = test::source_path(std::string("tests/fixtures/") + name);
    if (!std::filesystem::exists(dir + "/config.json")) continue;
    SCOPED_TRACE(dir);
    ++found;
    testing::internal::CaptureStderr();
    const Checkpoint c = Checkpoint::open(dir);
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
    size_t vision = 0;
    for (const std::string& n : c.store.names()) vision += classify_tensor_name(n) == TensorRole::kVision;
    EXPECT_GT(vision, 0u);
    EXPECT_EQ(c.store.names().size(), expected_weights(c.config).size() + vision);
    const std::string global = dir + "/config.global_style.json";
    if (!std::filesystem::exists(global)) continue;
    const ModelConfig g = load_model_config(global);
    ASSERT_EQ(g.layers.size(), c.config.layers.size());
    for (size_t i = 0; i < g.layers.size(); ++i) {
      EXPECT_EQ(g.layers[i].sliding, c.config.layers[i].sliding) << i;
      EXPECT_EQ(g.layers[i].head_dim, c.config.layers[i].head_dim) << i;
      EXPECT_EQ(g.layers[i].n_kv_heads, c.config.layers[i].n_kv_heads) << i;
    }
  }
  if (found == 0) GTEST_SKIP() << "no transformers-saved fixtures in tests/fixtures";
}

}  // namespace loader_checkpoint_test
}  // namespace dg
