// tools/dg_write_checkpoint: the checkpoint it writes for the embedded model's config.json has exactly the
// embedded model's tensor names, dtypes, shapes, shard split and index (what transformers' save_pretrained wrote),
// the loader accepts it unchanged, and its weights are the synthetic model's (synthetic_weights) in bf16. The
// built-in 26B-A4B config parses to the engine's own description of that structure.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "backend/registry.h"
#include "hf_layout.h"
#include "model/checkpoint.h"
#include "model/synthetic.h"
#include "support/paths.h"
#include "support/process.h"

namespace dg::test {
namespace write_checkpoint_tool_test {

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

ProcessResult write_tool(const std::string& args) {
  return run_command(binary_path("dg_write_checkpoint") + " " + args, true);
}

// Every element of the checkpoint's bf16 tensor `got` equals bf16(`want`), the f32 synthetic weight.
void expect_bf16_of(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype, DType::kBF16) << what;
  ASSERT_TRUE(got.shape == want.shape) << what << ": " << got.shape.str() << " vs " << want.shape.str();
  const auto* g = got.as<uint16_t>();
  for (int64_t i = 0; i < got.numel(); ++i) {
    ASSERT_TRUE(std::isfinite(bf16_to_f32(g[i]))) << what << " element " << i;
    ASSERT_EQ(g[i], f32_to_bf16(want.f32()[i])) << what << " element " << i << ": " << bf16_to_f32(g[i]) << " vs "
                                                << want.f32()[i];
  }
}

TEST(WriteCheckpointTool, EmbeddedModelLayoutAndSyntheticWeights) {
  const std::string out = scratch_dir("write-ckpt") + "/ck";
  const std::string model = source_path("models/dg-tiny");
  const ProcessResult r = write_tool("--config " + model + "/config.json --max-shard-size 14MB --seed 3 --out " + out);
  ASSERT_EQ(r.code, 0) << r.out;

  // The index save_pretrained wrote (max_shard_size "14MB", scripts/train_tiny.py): same shards, same totals.
  const auto want_index = read_json(model + "/model.safetensors.index.json");
  const auto got_index = read_json(out + "/model.safetensors.index.json");
  EXPECT_EQ(got_index["metadata"], want_index["metadata"]);
  EXPECT_EQ(got_index["weight_map"], want_index["weight_map"]);

  const TensorStore want = TensorStore::open_dir(model), got = TensorStore::open_dir(out);
  ASSERT_EQ(got.names(), want.names());
  for (const std::string& n : want.names()) {
    EXPECT_EQ(got.info(n).dtype, want.info(n).dtype) << n;
    EXPECT_TRUE(got.info(n).shape == want.info(n).shape) << n << ": " << got.info(n).shape.str();
  }

  const Checkpoint ck = Checkpoint::open(out);
  auto cpu = make_backend("cpu");
  const ModelWeights syn = synthetic_weights(ck.config, *cpu, 3);
  const ModelWeights& w = ck.weights;
  expect_bf16_of(w.embed, syn.embed, "embed");
  expect_bf16_of(w.final_norm, syn.final_norm, "final_norm");
  expect_bf16_of(w.sc_pre_norm, syn.sc_pre_norm, "sc_pre_norm");
  expect_bf16_of(w.sc_gate, syn.sc_gate, "sc_gate");
  expect_bf16_of(w.sc_up, syn.sc_up, "sc_up");
  expect_bf16_of(w.sc_down, syn.sc_down, "sc_down");
  ASSERT_EQ(w.layers.size(), syn.layers.size());
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const LayerWeights &a = w.layers[i], &b = syn.layers[i];
    const std::string l = "layer " + std::to_string(i) + " ";
    expect_bf16_of(a.q, b.q, l + "q");
    expect_bf16_of(a.k, b.k, l + "k");
    if (ck.config.layers[i].sliding) expect_bf16_of(a.v, b.v, l + "v");
    expect_bf16_of(a.o, b.o, l + "o");
    expect_bf16_of(a.q_norm, b.q_norm, l + "q_norm");
    expect_bf16_of(a.k_norm, b.k_norm, l + "k_norm");
    expect_bf16_of(a.gate, b.gate, l + "gate");
    expect_bf16_of(a.up, b.up, l + "up");
    expect_bf16_of(a.down, b.down, l + "down");
    expect_bf16_of(a.router_proj, b.router_proj, l + "router_proj");
    expect_bf16_of(a.router_scale, b.router_scale, l + "router_scale");
    expect_bf16_of(a.per_expert_scale, b.per_expert_scale, l + "per_expert_scale");
    expect_bf16_of(a.experts_gate_up, b.experts_gate_up, l + "experts_gate_up");
    expect_bf16_of(a.experts_down, b.experts_down, l + "experts_down");
    expect_bf16_of(a.input_norm, b.input_norm, l + "input_norm");
    expect_bf16_of(a.pre_ff_norm_2, b.pre_ff_norm_2, l + "pre_ff_norm_2");
    EXPECT_EQ(a.decoder_scalar, 1.0f);
    EXPECT_EQ(a.encoder_scalar, 1.0f);
  }
}

TEST(WriteCheckpointTool, LayerSliceEndsInAFullLayer) {
  const std::string out = scratch_dir("write-ckpt-slice") + "/ck";
  const ProcessResult r =
      write_tool("--config " + source_path("models/dg-tiny/config.json") + " --layers 4 --out " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  const Checkpoint ck = Checkpoint::open(out);
  ASSERT_EQ(ck.config.n_layers, 4);
  const std::vector<bool> sliding = {true, true, false, false};  // layer 3 made full, with layer 2's dims
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ck.config.layers[static_cast<size_t>(i)].sliding, sliding[i]) << i;
  EXPECT_EQ(ck.config.layers[3].head_dim, 128);
  EXPECT_EQ(ck.config.layers[3].n_kv_heads, 1);
  EXPECT_FALSE(ck.store.has("model.decoder.layers.3.self_attn.v_proj.weight"));
  EXPECT_TRUE(std::filesystem::exists(out + "/model.safetensors"));  // under 5 GB: one file, no index

  const ProcessResult again = write_tool("--layers 4 --out " + out);  // refuses to write into a checkpoint
  EXPECT_NE(again.code, 0);
  EXPECT_NE(again.out.find("is not an empty directory"), std::string::npos) << again.out;
  const ProcessResult bad = write_tool("--layers 31 --out " + scratch_dir("write-ckpt-bad") + "/ck");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("--layers 31 is outside [1, 30]"), std::string::npos) << bad.out;
}

// The built-in config.json describes what the engine's synthetic 26B-A4B describes, whole and sliced, and its
// decoder tensors hold exactly the parameters `info` counts for it.
TEST(WriteCheckpointTool, BuiltInConfigIsThe26BA4B) {
  for (int layers : {30, 4}) {
    const nlohmann::json j = layers == 30 ? diffusiongemma_26b_hf_config()
                                          : slice_hf_config(diffusiongemma_26b_hf_config(), layers);
    const ModelConfig got = parse_model_config(j.dump(), "built-in"), want = diffusiongemma_26b_config(layers);
    ASSERT_EQ(got.n_layers, want.n_layers);
    EXPECT_EQ(got.vocab, want.vocab);
    EXPECT_EQ(got.hidden, want.hidden);
    EXPECT_EQ(got.intermediate, want.intermediate);
    EXPECT_EQ(got.expert_ff, want.expert_ff);
    EXPECT_EQ(got.n_experts, want.n_experts);
    EXPECT_EQ(got.top_k, want.top_k);
    EXPECT_EQ(got.n_heads, want.n_heads);
    EXPECT_EQ(got.window, want.window);
    EXPECT_EQ(got.canvas, want.canvas);
    for (size_t i = 0; i < got.layers.size(); ++i) {
      EXPECT_EQ(got.layers[i].sliding, want.layers[i].sliding) << layers << " layers, layer " << i;
      EXPECT_EQ(got.layers[i].head_dim, want.layers[i].head_dim) << i;
      EXPECT_EQ(got.layers[i].n_kv_heads, want.layers[i].n_kv_heads) << i;
    }
  }
  const nlohmann::json j = diffusiongemma_26b_hf_config();
  const ModelConfig cfg = parse_model_config(j.dump(), "built-in");
  uint64_t text_bytes = 0;
  for (const HfTensor& t : hf_tensors(j, cfg, 1))
    if (t.name.rfind("model.decoder.", 0) == 0) text_bytes += static_cast<uint64_t>(t.shape.numel()) * 2;
  EXPECT_EQ(text_bytes, static_cast<uint64_t>(count_params(cfg).total()) * 2 + 30 * 2);  // + the layer_scalars
}

}  // namespace write_checkpoint_tool_test
}  // namespace dg::test
