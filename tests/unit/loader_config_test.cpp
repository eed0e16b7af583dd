// config.json -> ModelConfig: both head-dim spellings, layer_types default, per_layer_config keys, rope
// parameters and inverse frequencies, and one dg::Error naming the file and field for each bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "core/error.h"
#include "io/model_config.h"
#include "support/expect_error.h"
#include "support/paths.h"
#include "support/tiny_checkpoint.h"

namespace dg {
namespace loader_config_test {

using nlohmann::json;
using test::tiny_config_json;

constexpr const char* kSrc = "/ckpt/config.json";

ModelConfig parse(const json& j) { return parse_model_config(j.dump(), kSrc); }

// The tiny config with a modified text_config.
template <typename F>
ModelConfig parse_edited(F edit) {
  json j = tiny_config_json();
  edit(j["text_config"]);
  return parse(j);
}

void expect_same(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.vocab, b.vocab);
  EXPECT_EQ(a.hidden, b.hidden);
  EXPECT_EQ(a.n_heads, b.n_heads);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(a.layers[i].sliding, b.layers[i].sliding);
    EXPECT_EQ(a.layers[i].head_dim, b.layers[i].head_dim);
    EXPECT_EQ(a.layers[i].n_kv_heads, b.layers[i].n_kv_heads);
    EXPECT_EQ(a.layers[i].rope.type, b.layers[i].rope.type);
    EXPECT_EQ(a.layers[i].rope.theta, b.layers[i].rope.theta);
    EXPECT_EQ(a.rope_inv_freq(static_cast<int>(i)), b.rope_inv_freq(static_cast<int>(i)));
  }
}

TEST(LoaderConfig, TinyConfigResolvesEveryField) {
  const ModelConfig c = parse(tiny_config_json());
  EXPECT_EQ(c.canvas, 8);
  EXPECT_EQ(c.image_token_id, 63);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.vocab, 64);
  EXPECT_EQ(c.hidden, 16);
  EXPECT_EQ(c.intermediate, 24);
  EXPECT_EQ(c.expert_ff, 8);
  EXPECT_EQ(c.n_layers, 3);
  EXPECT_EQ(c.n_heads, 2);
  EXPECT_EQ(c.n_experts, 4);
  EXPECT_EQ(c.top_k, 2);
  EXPECT_EQ(c.window, 4);
  EXPECT_DOUBLE_EQ(c.rms_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.softcap, 30.0);
  EXPECT_EQ(c.pad_id, 0);
  EXPECT_EQ(c.bos_id, 2);
  EXPECT_EQ(c.eos_id, 1);
  ASSERT_EQ(c.layers.size(), 3u);
  EXPECT_EQ(c.n_full_layers(), 1);
  for (int i : {0, 1}) {
    const LayerSpec& l = c.layers[static_cast<size_t>(i)];
    EXPECT_TRUE(l.sliding);
    EXPECT_EQ(l.head_dim, 8);
    EXPECT_EQ(l.n_kv_heads, 1);
    EXPECT_EQ(l.rope.type, "default");
    EXPECT_DOUBLE_EQ(l.rope.theta, 1e4);
  }
  const LayerSpec& f = c.layers[2];
  EXPECT_FALSE(f.sliding);
  EXPECT_EQ(f.head_dim, 16);
  EXPECT_EQ(f.n_kv_heads, 1);
  EXPECT_EQ(f.rope.type, "proportional");
  EXPECT_DOUBLE_EQ(f.rope.theta, 1e6);
  EXPECT_DOUBLE_EQ(f.rope.partial_rotary_factor, 0.25);
  EXPECT_DOUBLE_EQ(f.rope.factor, 1.0);
}

TEST(LoaderConfig, GlobalHeadDimSpellingResolvesLikePerLayerConfig) {
  test::TinyOptions global;
  global.global_head_dim_style = true;
  const json g = tiny_config_json(global);
  ASSERT_FALSE(g["text_config"].contains("per_layer_config"));
  expect_same(parse(tiny_config_json()), parse(g));
}

TEST(LoaderConfig, GlobalKvHeadsOverrideOnlyFullLayers) {
  auto edit = [](json& t) {
    t.erase("per_layer_config");
    t["num_attention_heads"] = 4;
    t["num_key_value_heads"] = 2;
    t["global_head_dim"] = 16;
    t["num_global_key_value_heads"] = 1;
  };
  const ModelConfig c = parse_edited(edit);
  EXPECT_EQ(c.layers[0].n_kv_heads, 2);
  EXPECT_EQ(c.layers[0].head_dim, 8);
  EXPECT_EQ(c.layers[2].n_kv_heads, 1);
  EXPECT_EQ(c.layers[2].head_dim, 16);
  // Without num_global_key_value_heads the full layer keeps the base KV head count.
  const ModelConfig d = parse_edited([&](json& t) {
    edit(t);
    t.erase("num_global_key_value_heads");
  });
  EXPECT_EQ(d.layers[2].n_kv_heads, 2);
}

TEST(LoaderConfig, GlobalHeadDimDefaultsTo512WhenAbsent) {
  const ModelConfig c = parse_edited([](json& t) { t.erase("per_layer_config"); });
  EXPECT_EQ(c.layers[0].head_dim, 8);
  EXPECT_EQ(c.layers[2].head_dim, 512);
  EXPECT_EQ(c.rope_inv_freq(2).size(), 256u);
}

TEST(LoaderConfig, PerLayerConfigWinsOverGlobalKeys) {
  const ModelConfig c = parse_edited([](json& t) { t["global_head_dim"] = 64; });
  EXPECT_EQ(c.layers[2].head_dim, 16);
}

TEST(LoaderConfig, PerLayerConfigAcceptsZeroPaddedAndTypeKeys) {
  const ModelConfig padded = parse_edited([](json& t) {
    t["per_layer_config"] = {{"02", {{"head_dim", 16}, {"num_key_value_heads", 1}}}, {"00", {{"head_dim", 8}}}};
  });
  expect_same(parse(tiny_config_json()), padded);
  const ModelConfig by_type = parse_edited([](json& t) {
    t["per_layer_config"] = {{"full_attention", {{"head_dim", 16}, {"num_key_value_heads", 1}}},
                             {"sliding_attention", {{"head_dim", 8}, {"num_key_value_heads", 1}}}};
  });
  expect_same(parse(tiny_config_json()), by_type);
  // A layer-index entry overrides its type's entry; every layer listed also works without base head_dim.
  const ModelConfig full_list = parse_edited([](json& t) {
    t.erase("head_dim");
    t.erase("num_key_value_heads");
    t["per_layer_config"] = {{"0", {{"head_dim", 8}, {"num_key_value_heads", 1}, {"num_attention_heads", 2}}},
                             {"1", {{"head_dim", 8}, {"num_key_value_heads", 1}}},
                             {"2", {{"head_dim", 16}, {"num_key_value_heads", 1}}},
                             {"full_attention", {{"head_dim", 32}}}};
  });
  expect_same(parse(tiny_config_json()), full_list);
}

TEST(LoaderConfig, LayerTypesDefaultEverySixthLayerAndLastForcedFull) {
  const ModelConfig c3 = parse_edited([](json& t) { t.erase("layer_types"); });
  EXPECT_EQ(c3.n_full_layers(), 1);
  EXPECT_FALSE(c3.layers[2].sliding);  // forced: (2+1) % 6 != 0
  const ModelConfig c8 = parse_edited([](json& t) {
    t.erase("layer_types");
    t["num_hidden_layers"] = 8;
    t["per_layer_config"] = json::object();
  });
  const std::vector<bool> want = {true, true, true, true, true, false, true, false};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(c8.layers[i].sliding, want[i]) << "layer " << i;
  EXPECT_EQ(c8.layers[5].head_dim, 8);  // empty per_layer_config: no global_head_dim fallback
  const ModelConfig c12 = parse_edited([](json& t) {
    t.erase("layer_types");
    t["num_hidden_layers"] = 12;
  });
  EXPECT_EQ(c12.n_full_layers(), 2);
  EXPECT_FALSE(c12.layers[5].sliding);
  EXPECT_FALSE(c12.layers[11].sliding);
  const ModelConfig forced = parse_edited([](json& t) { t["layer_types"][2] = "sliding_attention"; });
  EXPECT_FALSE(forced.layers[2].sliding);
}

TEST(LoaderConfig, DefaultsWhenOptionalKeysAbsent) {
  json j = tiny_config_json();
  for (const char* k : {"canvas_length", "image_token_id", "tie_word_embeddings"}) j.erase(k);
  for (const char* k :
       {"rms_norm_eps", "final_logit_softcapping", "hidden_activation", "attention_bias", "use_bidirectional_attention",
        "rope_parameters", "pad_token_id", "bos_token_id", "eos_token_id"})
    j["text_config"].erase(k);
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.canvas, 256);
  EXPECT_EQ(c.image_token_id, 258880);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.rms_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.softcap, 30.0);
  EXPECT_EQ(c.pad_id, 0);
  EXPECT_EQ(c.bos_id, 2);
  EXPECT_EQ(c.eos_id, 1);
  EXPECT_EQ(c.layers[0].rope.type, "default");
  EXPECT_DOUBLE_EQ(c.layers[0].rope.theta, 1e4);
  EXPECT_EQ(c.layers[2].rope.type, "proportional");
  EXPECT_DOUBLE_EQ(c.layers[2].rope.theta, 1e6);
  EXPECT_DOUBLE_EQ(c.layers[2].rope.partial_rotary_factor, 0.25);
}

TEST(LoaderConfig, SoftcapEosAndLegacyRopeThetaSpellings) {
  EXPECT_DOUBLE_EQ(parse_edited([](json& t) { t["final_logit_softcapping"] = 12.5; }).softcap, 12.5);
  EXPECT_DOUBLE_EQ(parse_edited([](json& t) { t["final_logit_softcapping"] = nullptr; }).softcap, 0.0);
  EXPECT_EQ(parse_edited([](json& t) { t["eos_token_id"] = {7, 1, 5}; }).eos_id, 7);
  const ModelConfig legacy = parse_edited([](json& t) {
    t.erase("rope_parameters");
    t["rope_theta"] = 5000.0;
  });
  EXPECT_DOUBLE_EQ(legacy.layers[0].rope.theta, 5000.0);
  EXPECT_DOUBLE_EQ(legacy.layers[2].rope.theta, 1e6);
}

TEST(LoaderConfig, RopeInvFreqProportionalMatchesReference) {
  // SPEC §2.3 [verified]: D=32, theta 1e6, p=0.25 -> [1, 0.4217, 0.1778, 0.0750, 0 x12].
  const ModelConfig c = parse_edited([](json& t) { t["per_layer_config"]["2"]["head_dim"] = 32; });
  const std::vector<float> f = c.rope_inv_freq(2);
  ASSERT_EQ(f.size(), 16u);
  const float want[4] = {1.0f, 0.4217f, 0.1778f, 0.0750f};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(f[i], want[i], 1e-4) << "i=" << i;
  for (size_t i = 4; i < 16; ++i) EXPECT_EQ(f[i], 0.0f) << "i=" << i;
  // factor divides every frequency.
  const ModelConfig h = parse_edited([](json& t) {
    t["per_layer_config"]["2"]["head_dim"] = 32;
    t["rope_parameters"]["full_attention"]["factor"] = 2.0;
  });
  const std::vector<float> g = h.rope_inv_freq(2);
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(g[i], f[i] / 2.0f);
}

TEST(LoaderConfig, RopeInvFreqDefaultMatchesFormula) {
  const ModelConfig c = parse(tiny_config_json());
  const std::vector<float> f = c.rope_inv_freq(0);  // D=8, theta 1e4: 10^-i
  ASSERT_EQ(f.size(), 4u);
  const float want[4] = {1.0f, 0.1f, 0.01f, 0.001f};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(f[i], want[i], 1e-6f * want[i]) << "i=" << i;
  // Full layer of the tiny model: D=16, p=0.25 -> R = 2 rotated frequencies, denominator the full D.
  const std::vector<float> full = c.rope_inv_freq(2);
  ASSERT_EQ(full.size(), 8u);
  EXPECT_EQ(full[0], 1.0f);
  EXPECT_NEAR(full[1], std::pow(1e6, -2.0 / 16.0), 1e-7);
  for (size_t i = 2; i < 8; ++i) EXPECT_EQ(full[i], 0.0f);
  DG_EXPECT_ERROR(c.rope_inv_freq(3), "layer 3");
}

TEST(LoaderConfig, MalformedOrMisshapenFilesFail) {
  DG_EXPECT_ERROR(parse_model_config("{\"text_config\": {", kSrc), kSrc, "malformed JSON");
  DG_EXPECT_ERROR(parse_model_config("[1, 2]", kSrc), kSrc, "object");
  DG_EXPECT_ERROR(parse_model_config("{}", kSrc), kSrc, "text_config");
  DG_EXPECT_ERROR(parse_model_config("{\"text_config\": 5}", kSrc), kSrc, "text_config");
  const std::string missing = test::scratch_dir("cfg-missing") + "/config.json";
  DG_EXPECT_ERROR(load_model_config(missing), missing);
}

TEST(LoaderConfig, EachMissingRequiredFieldIsNamed) {
  for (const char* field :
       {"vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "num_hidden_layers",
        "num_attention_heads", "num_experts", "top_k_experts", "sliding_window", "head_dim", "num_key_value_heads"}) {
    SCOPED_TRACE(field);
    json j = tiny_config_json();
    j["text_config"].erase(field);
    DG_EXPECT_ERROR(parse(j), kSrc, std::string("text_config.") + field);
  }
}

TEST(LoaderConfig, UnsupportedOrInvalidValuesFail) {
  struct Case {
    const char* why;
    std::function<void(json&)> edit;  // edits the whole config
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"untied", [](json& j) { j["tie_word_embeddings"] = false; }, "tie_word_embeddings"},
      {"untied text",
       [](json& j) {
         j.erase("tie_word_embeddings");
         j["text_config"]["tie_word_embeddings"] = false;
       },
       "tie_word_embeddings"},
      {"bidi all", [](json& j) { j["text_config"]["use_bidirectional_attention"] = "all"; },
       "use_bidirectional_attention"},
      {"bidi other", [](json& j) { j["text_config"]["use_bidirectional_attention"] = true; },
       "use_bidirectional_attention"},
      {"activation", [](json& j) { j["text_config"]["hidden_activation"] = "silu"; }, "hidden_activation"},
      {"bias", [](json& j) { j["text_config"]["attention_bias"] = true; }, "attention_bias"},
      {"zero size", [](json& j) { j["text_config"]["hidden_size"] = 0; }, "text_config.hidden_size"},
      {"negative", [](json& j) { j["text_config"]["num_experts"] = -4; }, "text_config.num_experts"},
      {"string size", [](json& j) { j["text_config"]["vocab_size"] = "64"; }, "text_config.vocab_size"},
      {"fraction", [](json& j) { j["text_config"]["hidden_size"] = 16.5; }, "text_config.hidden_size"},
      {"huge", [](json& j) { j["text_config"]["hidden_size"] = 1e12; }, "text_config.hidden_size"},
      {"top_k", [](json& j) { j["text_config"]["top_k_experts"] = 5; }, "top_k_experts"},
      {"gqa", [](json& j) { j["text_config"]["per_layer_config"]["2"]["num_key_value_heads"] = 3; },
       "num_key_value_heads"},
      {"odd dim", [](json& j) { j["text_config"]["head_dim"] = 7; }, "head_dim"},
      {"n_heads", [](json& j) { j["text_config"]["per_layer_config"]["2"]["num_attention_heads"] = 4; },
       "num_attention_heads"},
      {"types len", [](json& j) { j["text_config"]["layer_types"] = {"full_attention"}; }, "layer_types"},
      {"types val", [](json& j) { j["text_config"]["layer_types"][0] = "chunked_attention"; }, "layer_types"},
      {"plc key", [](json& j) { j["text_config"]["per_layer_config"]["x1"] = json::object(); }, "per_layer_config"},
      {"plc range", [](json& j) { j["text_config"]["per_layer_config"]["3"] = json::object(); }, "per_layer_config"},
      {"plc twice", [](json& j) { j["text_config"]["per_layer_config"]["002"] = json::object(); }, "per_layer_config"},
      {"plc value", [](json& j) { j["text_config"]["per_layer_config"]["2"]["head_dim"] = "16"; },
       "per_layer_config.2.head_dim"},
      {"rope type", [](json& j) { j["text_config"]["rope_parameters"]["full_attention"]["rope_type"] = "yarn"; },
       "rope_type"},
      {"rope theta", [](json& j) { j["text_config"]["rope_parameters"]["sliding_attention"]["rope_theta"] = -1; },
       "rope_theta"},
      {"rope p", [](json& j) { j["text_config"]["rope_parameters"]["full_attention"]["partial_rotary_factor"] = 1.5; },
       "partial_rotary_factor"},
      {"eps", [](json& j) { j["text_config"]["rms_norm_eps"] = 0; }, "rms_norm_eps"},
      {"softcap", [](json& j) { j["text_config"]["final_logit_softcapping"] = -1; }, "final_logit_softcapping"},
      {"pad id", [](json& j) { j["text_config"]["pad_token_id"] = 64; }, "pad_token_id"},
      {"eos type", [](json& j) { j["text_config"]["eos_token_id"] = "1"; }, "eos_token_id"},
      {"canvas", [](json& j) { j["canvas_length"] = 0; }, "canvas_length"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    json j = tiny_config_json();
    c.edit(j);
    DG_EXPECT_ERROR(parse(j), kSrc, c.expect);
  }
}

}  // namespace loader_config_test
}  // namespace dg
