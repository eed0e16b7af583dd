// Every bad checkpoint gives exactly one dg::Error from Checkpoint::open whose message names the offending file
// or tensor; and a fuzz loop over header truncations and byte flips never crashes (run it under cpu-asan too).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "model/checkpoint.h"
#include "support/expect_error.h"
#include "support/paths.h"
#include "support/tiny_checkpoint.h"

namespace dg {
namespace loader_errors_test {

using nlohmann::json;
using test::TinyOptions;

// A tiny checkpoint whose tensor list went through `edit` first.
template <typename F>
std::string checkpoint_with_tensors(const std::string& tag, F edit, const TinyOptions& o = {}) {
  auto tensors = test::tiny_tensors(test::tiny_model_config(o), o);
  edit(tensors);
  const std::string dir = test::scratch_dir(tag);
  test::write_checkpoint(dir, test::tiny_config_json(o), tensors, o);
  return dir;
}

void replace(std::vector<std::pair<std::string, Tensor>>& ts, const std::string& name, Tensor t) {
  for (auto& [n, x] : ts)
    if (n == name) x = std::move(t);
}

TEST(LoaderErrors, MissingOrNonDirectoryPathFails) {
  const std::string dir = test::scratch_dir("err-dir");
  DG_EXPECT_ERROR(Checkpoint::open(dir + "/nope"), dir + "/nope", "does not exist");
  test::write_text_file(dir + "/file", "x");
  DG_EXPECT_ERROR(Checkpoint::open(dir + "/file"), dir + "/file", "not a directory");
}

TEST(LoaderErrors, MissingOrMalformedConfigFails) {
  const std::string dir = test::make_tiny_checkpoint("err-cfg");
  const std::string cfg = dir + "/config.json";
  std::filesystem::remove(cfg);
  DG_EXPECT_ERROR(Checkpoint::open(dir), "config.json", dir);
  test::write_text_file(cfg, "{\"text_config\": {\"vocab_size\": 64,");
  DG_EXPECT_ERROR(Checkpoint::open(dir), cfg, "malformed");
  json j = test::tiny_config_json();
  j["text_config"].erase("moe_intermediate_size");
  test::write_text_file(cfg, j.dump());
  DG_EXPECT_ERROR(Checkpoint::open(dir), cfg, "text_config.moe_intermediate_size");
  j = test::tiny_config_json();
  j["tie_word_embeddings"] = false;
  test::write_text_file(cfg, j.dump());
  DG_EXPECT_ERROR(Checkpoint::open(dir), cfg, "tie_word_embeddings");
}

TEST(LoaderErrors, BadGenerationConfigFails) {
  const std::string dir = test::make_tiny_checkpoint("err-gen");
  const std::string gen = dir + "/generation_config.json";
  test::write_text_file(gen, "{\"t_min\": 0.9, \"t_max\": 0.5}");
  DG_EXPECT_ERROR(Checkpoint::open(dir), gen, "t_max");
  test::write_text_file(gen, "{\"eos_token_id\": [1, 64]}");
  DG_EXPECT_ERROR(Checkpoint::open(dir), gen, "eos_token_id 64");
  test::write_text_file(gen, "not json");
  DG_EXPECT_ERROR(Checkpoint::open(dir), gen, "malformed");
}

TEST(LoaderErrors, MissingTensorIsNamed) {
  for (const char* name :
       {"model.decoder.layers.1.self_attn.v_proj.weight", "model.decoder.embed_tokens.weight",
        "model.encoder.language_model.layers.2.layer_scalar", "model.decoder.self_conditioning.down_proj.weight"}) {
    SCOPED_TRACE(name);
    const std::string dir = checkpoint_with_tensors(
        "err-missing", [&](auto& ts) { std::erase_if(ts, [&](const auto& p) { return p.first == name; }); });
    DG_EXPECT_ERROR(Checkpoint::open(dir), "missing tensor", name, dir);
  }
}

TEST(LoaderErrors, WrongShapeNamesTensorFileAndBothShapes) {
  const std::string name = "model.decoder.layers.2.self_attn.q_proj.weight";
  const std::string dir = checkpoint_with_tensors("err-shape", [&](auto& ts) {
    replace(ts, name, host_tensor(DType::kF32, {16, 16}));  // a sliding-layer shape on the full layer
  });
  DG_EXPECT_ERROR(Checkpoint::open(dir), name, dir + "/model.safetensors", "[16, 16]", "[32, 16]");
  // Config and checkpoint disagreeing on the spelling (512-dim default) is caught the same way.
  const std::string d2 = test::make_tiny_checkpoint("err-spelling");
  json j = test::tiny_config_json();
  j["text_config"].erase("per_layer_config");
  test::write_text_file(d2 + "/config.json", j.dump());
  DG_EXPECT_ERROR(Checkpoint::open(d2), "model.decoder.layers.2.self_attn.q_proj.weight", "[1024, 16]");
}

TEST(LoaderErrors, NonFloatWeightDtypeIsNamed) {
  const std::string name = "model.decoder.layers.0.router.scale";
  const std::string dir =
      checkpoint_with_tensors("err-int", [&](auto& ts) { replace(ts, name, host_tensor(DType::kI32, {16})); });
  DG_EXPECT_ERROR(Checkpoint::open(dir), name, "model.safetensors", "I32");
}

TEST(LoaderErrors, NonFiniteLayerScalarIsNamed) {
  const std::string name = "model.decoder.layers.1.layer_scalar";
  const std::string dir = checkpoint_with_tensors("err-nan", [&](auto& ts) {
    Tensor t = host_tensor(DType::kF32, {1});
    t.f32()[0] = NAN;
    replace(ts, name, t);
  });
  DG_EXPECT_ERROR(Checkpoint::open(dir), name, "not finite");
}

// Rewrites the dtype string of `tensor` inside the header of `file` (same length keeps offsets valid).
void patch_header(const std::string& file, const std::string& from, const std::string& to) {
  auto bytes = test::read_bytes(file);
  std::string s(bytes.begin(), bytes.end());
  const size_t at = s.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  s.replace(at, from.size(), to);
  test::write_bytes(file, std::vector<uint8_t>(s.begin(), s.end()));
}

TEST(LoaderErrors, UnknownDtypeInShardIsNamed) {
  TinyOptions o;
  o.dtype = DType::kBF16;
  const std::string dir = test::make_tiny_checkpoint("err-f8", o);
  const std::string file = dir + "/model.safetensors";
  patch_header(file, R"("model.decoder.norm.weight":{"dtype":"BF16")",
               R"("model.decoder.norm.weight":{"dtype":"Q4"  )");
  DG_EXPECT_ERROR(Checkpoint::open(dir), "model.decoder.norm.weight", file, "'Q4'");
  const std::string d2 = test::make_tiny_checkpoint("err-f8b", o);
  patch_header(d2 + "/model.safetensors", R"("model.decoder.norm.weight":{"dtype":"BF16")",
               R"("model.decoder.norm.weight":{"dtype":"F8_E4M3")");
  DG_EXPECT_ERROR(Checkpoint::open(d2), "model.decoder.norm.weight", d2 + "/model.safetensors", "F8_E4M3");
}

TEST(LoaderErrors, TruncatedShardNamesTensorAndFile) {
  TinyOptions o;
  o.sharded = true;
  const std::string dir = test::make_tiny_checkpoint("err-trunc", o);
  const std::string shard = dir + "/model-00002-of-00002.safetensors";
  auto bytes = test::read_bytes(shard);
  ASSERT_GT(bytes.size(), 2u);
  bytes.erase(bytes.end() - 2, bytes.end());  // not resize(): GCC 12's -Wstringop-overflow sees its growing branch
  test::write_bytes(shard, bytes);
  // The last tensor written is the final encoder layer_scalar; its data no longer fits.
  DG_EXPECT_ERROR(Checkpoint::open(dir), shard, "truncated", "'model.encoder.language_model.layers.2.layer_scalar'");
}

TEST(LoaderErrors, HeaderLengthLargerThanFileFails) {
  const std::string dir = test::make_tiny_checkpoint("err-hlen");
  const std::string file = dir + "/model.safetensors";
  auto bytes = test::read_bytes(file);
  const uint64_t huge = bytes.size();  // the length field alone makes it impossible
  std::memcpy(bytes.data(), &huge, 8);
  test::write_bytes(file, bytes);
  DG_EXPECT_ERROR(Checkpoint::open(dir), file, "header length");
}

TEST(LoaderErrors, MalformedHeaderJsonFails) {
  const std::string dir = test::make_tiny_checkpoint("err-hjson");
  const std::string file = dir + "/model.safetensors";
  patch_header(file, R"("model.decoder.norm.weight":{)", R"("model.decoder.norm.weight":[)");
  DG_EXPECT_ERROR(Checkpoint::open(dir), file, "malformed");
}

TEST(LoaderErrors, IndexNamingMissingShardFails) {
  TinyOptions o;
  o.sharded = true;
  const std::string dir = test::make_tiny_checkpoint("err-index", o);
  std::filesystem::remove(dir + "/model-00001-of-00002.safetensors");
  DG_EXPECT_ERROR(Checkpoint::open(dir), "model.safetensors.index.json", "model-00001-of-00002.safetensors");
}

// Loads `dir`; the only acceptable outcomes are success (true) or dg::Error (false).
bool expect_loads_or_dg_error(const std::string& dir, const std::string& what) {
  try {
    (void)Checkpoint::open(dir);
    return true;
  } catch (const dg::Error&) {
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": non-dg exception: " << e.what();
  }
  return false;
}

TEST(LoaderErrors, HeaderTruncationsAndByteFlipsNeverCrash) {
  const std::string dir = test::make_tiny_checkpoint("err-fuzz", TinyOptions{.dtype = DType::kBF16});
  const std::string file = dir + "/model.safetensors";
  const std::vector<uint8_t> good = test::read_bytes(file);
  uint64_t header_len = 0;
  std::memcpy(&header_len, good.data(), 8);
  const size_t header_end = 8 + static_cast<size_t>(header_len);
  ASSERT_LT(header_end, good.size());

  testing::internal::CaptureStderr();  // flips that rename a tensor can produce unknown-tensor warnings
  int cases = 0, loaded = 0;
  // Truncations: every length inside the length field, a stride through the header, and into the data.
  for (size_t len = 0; len < good.size(); len += (len < 16 ? 1 : len < header_end + 64 ? 13 : 97)) {
    test::write_bytes(file, std::vector<uint8_t>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(len)));
    loaded += expect_loads_or_dg_error(dir, fmt::format("truncated to {}", len));
    ++cases;
  }
  // Byte flips over the length field and the header, with characters that matter to a JSON parser.
  const uint8_t values[] = {'0', '9', '"', '{', '}', '[', ']', ',', ':', '-', 'e', '.', ' ', 0x00, 0xff, 0xc3};
  uint64_t state = 12345;
  for (int i = 0; i < 2500; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const size_t pos = static_cast<size_t>((state >> 33) % header_end);
    std::vector<uint8_t> bytes = good;
    bytes[pos] = static_cast<uint8_t>(i < 8 * 16 ? values[i % 16] ^ (i / 16) : values[(state >> 20) % 16]);
    if (i < 128) bytes[static_cast<size_t>(i % 8)] = static_cast<uint8_t>(state >> 40);  // the length field
    test::write_bytes(file, bytes);
    loaded += expect_loads_or_dg_error(dir, fmt::format("flip #{} at {}", i, pos));
    ++cases;
  }
  // Digit edits inside shapes and offsets: the header stays valid JSON but the numbers lie.
  for (size_t pos = 8; pos < header_end; ++pos) {
    if (good[pos] < '0' || good[pos] > '9') continue;
    std::vector<uint8_t> bytes = good;
    bytes[pos] = static_cast<uint8_t>('0' + (good[pos] - '0' + 5) % 10);
    test::write_bytes(file, bytes);
    loaded += expect_loads_or_dg_error(dir, fmt::format("digit at {}", pos));
    ++cases;
  }
  testing::internal::GetCapturedStderr();
  EXPECT_GT(cases, 3000);
  EXPECT_GT(loaded, 0) << "some edits (padding, metadata) leave a loadable file";
  EXPECT_LT(loaded, cases / 2) << "most edits must be caught";
  RecordProperty("cases", cases);
  RecordProperty("loaded", loaded);
  test::write_bytes(file, good);
  EXPECT_NO_THROW((void)Checkpoint::open(dir));
}

}  // namespace loader_errors_test
}  // namespace dg
