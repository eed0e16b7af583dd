// Every refusal of the pack reader and of quantize, with its message: a newer manifest version, a misaligned
// offset, a size mismatch, a truncated or missing blob, bad profiles and --set classes or formats, a shape that
// cannot hold its format, an existing output, an interrupted run's leftovers, a source with a non-finite weight (and
// no pack left behind).
#include <gtest/gtest.h>

#include <filesystem>

#include "model/checkpoint.h"
#include "model/weights.h"
#include "quant/pack_reader.h"
#include "quant/policy.h"
#include "quant/quant_test_util.h"
#include "model/quantize.h"
#include "support/expect_error.h"
#include "support/paths.h"
#include "support/tiny_checkpoint.h"

namespace dg::test {
namespace pack_refusal_test {

namespace fs = std::filesystem;

const std::string& base_pack() {
  static const std::string p = quantize_fixture("refusal-base", source_path("tests/fixtures/tiny_a"), "q4");
  return p;
}

// The first tensor entry of the manifest with a packed format (an expert stack).
nlohmann::json& first_packed(nlohmann::json& j) {
  for (nlohmann::json& t : j["tensors"])
    if (t["format"] != "raw") return t;
  throw std::runtime_error("no packed tensor");
}

TEST(PackRefusal, NewerVersion) {
  const std::string p = edited_pack(base_pack(), [](nlohmann::json& j) { j["version"] = 3; });
  DG_EXPECT_ERROR(Checkpoint::open(p), "model.dgq.json", "pack format version 3 is newer", "reads (up to 2)",
                  "update diffgemma");
}

TEST(PackRefusal, MisalignedOffset) {
  const std::string p = edited_pack(base_pack(), [](nlohmann::json& j) {
    nlohmann::json& t = first_packed(j);
    t["offset"] = t["offset"].get<uint64_t>() + 16;
  });
  DG_EXPECT_ERROR(Checkpoint::open(p), "experts.gate_up_proj", "is not 64-byte aligned", "diffgemma quantize");
}

TEST(PackRefusal, SizeMismatch) {
  const std::string p = edited_pack(base_pack(), [](nlohmann::json& j) {
    nlohmann::json& t = first_packed(j);
    t["bytes"] = t["bytes"].get<uint64_t>() - 64;
  });
  DG_EXPECT_ERROR(Checkpoint::open(p), "experts.gate_up_proj", "the manifest records", "but q4 [8, 64, 64] takes");
  const std::string shape = edited_pack(base_pack(), [](nlohmann::json& j) { first_packed(j)["shape"][2] = 48; });
  DG_EXPECT_ERROR(Checkpoint::open(shape), "experts.gate_up_proj", "cannot have shape [8, 64, 48]", "multiple of 32");
}

TEST(PackRefusal, TruncatedOrMissingBlob) {
  const std::string p = edited_pack(base_pack(), [](nlohmann::json&) {});
  const std::string blob = p + "/model.dgq.bin";
  const auto size = fs::file_size(blob);
  fs::resize_file(blob, size - 100);
  DG_EXPECT_ERROR(Checkpoint::open(p), "model.dgq.bin' is truncated", std::to_string(size - 100) + " bytes",
                  "records " + std::to_string(size));
  fs::resize_file(blob, size + 8);
  DG_EXPECT_ERROR(Checkpoint::open(p), "do not belong together");
  fs::remove(blob);
  DG_EXPECT_ERROR(Checkpoint::open(p), "has no model.dgq.bin");
}

TEST(PackRefusal, OverlapAndOverrun) {
  const std::string p = edited_pack(base_pack(), [](nlohmann::json& j) {
    j["tensors"][1]["offset"] = j["tensors"][0]["offset"];
  });
  DG_EXPECT_ERROR(Checkpoint::open(p), "overlap the previous tensor");
  const std::string q = edited_pack(base_pack(), [](nlohmann::json& j) {
    j["tensors"].back()["offset"] = j["blob"]["bytes"].get<uint64_t>() / 64 * 64 + 64;
  });
  DG_EXPECT_ERROR(Checkpoint::open(q), "run past the end of the");
}

TEST(PackRefusal, BadProfileAndSets) {
  DG_EXPECT_ERROR(make_quant_policy("q5", {}), "unknown profile 'q5'", "q4, q6, nvfp4, fp8 or fp8-all");
  DG_EXPECT_ERROR(make_quant_policy("q4", {"attn"}), "--set 'attn'", "expected CLASS=FORMAT");
  DG_EXPECT_ERROR(make_quant_policy("q4", {"mlp=q8"}), "unknown class 'mlp'", "experts.gate_up");
  DG_EXPECT_ERROR(make_quant_policy("q4", {"embed=q8"}), "class 'embed' is locked", "tied lm_head");
  DG_EXPECT_ERROR(make_quant_policy("q4", {"router=q4"}), "class 'router' is locked");
  DG_EXPECT_ERROR(make_quant_policy("q4", {"norms=fp8"}), "class 'norms' is locked");
  DG_EXPECT_ERROR(make_quant_policy("q4", {"attn=q5"}), "unknown format 'q5'", "raw, q8, q6, q4, nvfp4, fp8");
  DG_EXPECT_ERROR(make_quant_policy("q4", {"attn=q8", "attn=q4"}), "class 'attn' is set twice");
  const QuantPolicy p = make_quant_policy("q6", {"experts=nvfp4", "experts.down=q8"});
  EXPECT_EQ(p.format_of(WeightClass::kExpertsGateUp), PackFormat{DType::kNvFp4});
  EXPECT_EQ(p.format_of(WeightClass::kExpertsDown), PackFormat{DType::kQ8});
  EXPECT_EQ(p.format_of(WeightClass::kEmbed), PackFormat{});
}

TEST(PackRefusal, DimensionConstraintBeforeAnythingIsWritten) {
  QuantizeOptions o;
  o.model_dir = source_path("tests/fixtures/tiny_b");  // expert_ff 24: experts.down has K = 24
  o.out_dir = scratch_dir("dims") + "/pack";
  o.profile = "q4";
  DG_EXPECT_ERROR(quantize_model(o), "7 tensor(s) cannot be stored in their format; nothing was written",
                  "'model.decoder.layers.0.experts.down_proj' (class experts.down) [16, 32, 24] as q4",
                  "must be a multiple of 32", "--set CLASS=FORMAT");
  EXPECT_FALSE(fs::exists(o.out_dir));
  EXPECT_FALSE(fs::exists(o.out_dir + ".dgq-partial"));
  o.sets = {"experts.down=q8"};
  quantize_model(o);
  EXPECT_TRUE(is_pack_dir(o.out_dir));
}

TEST(PackRefusal, ExistingOutputsAndPacksAsSources) {
  QuantizeOptions o;
  o.model_dir = source_path("tests/fixtures/tiny_a");
  o.out_dir = scratch_dir("exists");  // an empty directory that is not a pack
  write_text_file(o.out_dir + "/notes.txt", "keep me");
  DG_EXPECT_ERROR(quantize_model(o), "already exists", "--force");
  o.force = true;
  DG_EXPECT_ERROR(quantize_model(o), "is not a .dgq pack", "remove it yourself");
  EXPECT_TRUE(fs::exists(o.out_dir + "/notes.txt"));
  o.model_dir = base_pack();
  o.out_dir = scratch_dir("repack") + "/pack";
  DG_EXPECT_ERROR(quantize_model(o), "is already a .dgq pack");
}

TEST(PackRefusal, InterruptedRunLeavesNothingLoadable) {
  // What an interrupted run leaves: the partial directory with the blob and sidecars, but no manifest (written last).
  const std::string out = scratch_dir("interrupted") + "/pack";
  fs::create_directories(out + ".dgq-partial");
  fs::copy_file(base_pack() + "/model.dgq.bin", out + ".dgq-partial/model.dgq.bin");
  fs::copy_file(base_pack() + "/config.json", out + ".dgq-partial/config.json");
  DG_EXPECT_ERROR(Checkpoint::open(out), "does not exist");
  DG_EXPECT_ERROR(Checkpoint::open(out + ".dgq-partial"), "no model.safetensors");
  QuantizeOptions o;
  o.model_dir = source_path("tests/fixtures/tiny_a");
  o.out_dir = out;
  quantize_model(o);  // the next run replaces the leftover
  EXPECT_TRUE(is_pack_dir(out));
  EXPECT_FALSE(fs::exists(out + ".dgq-partial"));
}

TEST(PackRefusal, NonFiniteWeightLeavesNoPack) {
  TinyOptions t;
  const ModelConfig cfg = tiny_model_config(t);
  auto tensors = tiny_tensors(cfg, t);
  for (auto& [name, tensor] : tensors)
    if (name == "model.decoder.layers.1.experts.down_proj") tensor.f32()[5] = INFINITY;
  const std::string src = scratch_dir("nonfinite-src");
  write_checkpoint(src, tiny_config_json(t), tensors, t);
  QuantizeOptions o;
  o.model_dir = src;
  o.out_dir = scratch_dir("nonfinite") + "/pack";
  o.profile = "fp8";
  DG_EXPECT_ERROR(quantize_model(o), "model.decoder.layers.1.experts.down_proj", "non-finite value (inf)",
                  "element 5");
  EXPECT_FALSE(fs::exists(o.out_dir));
  EXPECT_FALSE(fs::exists(o.out_dir + ".dgq-partial"));
}

}  // namespace pack_refusal_test
}  // namespace dg::test
