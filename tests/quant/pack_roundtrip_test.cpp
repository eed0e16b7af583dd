// Pack write -> read: every tensor of a quantized fixture comes back byte-identical to the source (raw classes)
// or to packing the source tensor directly (quantized classes), with the profile's per-class formats, aligned
// offsets and sidecars; two runs give byte-identical packs; --force replaces a pack.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "io/json_fields.h"
#include "model/checkpoint.h"
#include "quant/pack_reader.h"
#include "quant/packed_tensor.h"
#include "quant/quant_test_util.h"
#include "model/quantize.h"
#include "support/paths.h"
#include "support/tiny_checkpoint.h"

namespace dg::test {
namespace pack_roundtrip_test {

namespace fs = std::filesystem;

std::string tiny_a() { return source_path("tests/fixtures/tiny_a"); }

class PackRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(PackRoundTrip, TensorsComeBackIdentical) {
  const std::string profile = GetParam();
  const std::string pack = quantize_fixture("roundtrip-" + profile, tiny_a(), profile);
  const Pack p = open_pack(pack);
  const TensorStore src = TensorStore::open_dir(tiny_a());
  const DType experts = profile == "q4" ? DType::kQ4 : profile == "q6" ? DType::kQ6
                        : profile == "nvfp4" ? DType::kNvFp4 : DType::kFp8;
  ASSERT_EQ(p.manifest.tensors.size(), expected_weights(Checkpoint::open(tiny_a()).config).size());
  EXPECT_EQ(p.manifest.profile, profile);
  int packed = 0;
  for (const PackEntry& e : p.manifest.tensors) {
    SCOPED_TRACE(e.name);
    EXPECT_EQ(e.offset % 64, 0u);
    const TensorInfo& s = src.info(e.name);
    const Tensor got = p.store.view(e.name);
    ASSERT_TRUE(got.shape == s.shape);
    if (e.cls == "experts.gate_up" || e.cls == "experts.down") EXPECT_EQ(e.dtype, experts);
    else if (profile == "fp8-all" && (e.cls == "sc" || e.cls == "attn" || e.cls == "dense"))
      EXPECT_EQ(e.dtype, DType::kFp8);
    else if (e.cls == "sc") EXPECT_EQ(e.dtype, DType::kQ8);
    else EXPECT_EQ(e.dtype, s.dtype) << "attn, dense and the locked classes stay raw";
    if (dtype_is_packed(e.dtype)) {
      ++packed;
      const Tensor want = pack_tensor(src.view(e.name), e.dtype);
      ASSERT_EQ(got.nbytes(), want.nbytes());
      EXPECT_EQ(std::memcmp(got.data, want.data, want.nbytes()), 0);
    } else {
      ASSERT_EQ(got.nbytes(), s.nbytes);
      EXPECT_EQ(std::memcmp(got.data, s.data, s.nbytes), 0);
    }
  }
  // two stacks per layer of six, three self-conditioning matrices; fp8-all: per layer also q, k, v (sliding layers
  // only), o, gate, up and down
  int attn_dense = 0;
  for (const LayerWeights& L : Checkpoint::open(tiny_a()).weights.layers) attn_dense += L.v.empty() ? 6 : 7;
  EXPECT_EQ(packed, 2 * 6 + 3 + (profile == "fp8-all" ? attn_dense : 0));
  for (const char* f : {"config.json", "generation_config.json"}) EXPECT_TRUE(fs::exists(fs::path(pack) / f)) << f;
  EXPECT_FALSE(fs::exists(pack + ".dgq-partial"));

  const Checkpoint ck = Checkpoint::open(pack);  // binds like a Hugging Face directory
  ASSERT_TRUE(ck.pack.has_value());
  EXPECT_EQ(ck.weights.layers[0].experts_gate_up.dtype, experts);
  EXPECT_EQ(ck.weights.sc_down.dtype, profile == "fp8-all" ? DType::kFp8 : DType::kQ8);
  EXPECT_EQ(ck.weights.embed.dtype, DType::kBF16);
}

INSTANTIATE_TEST_SUITE_P(Profiles, PackRoundTrip, ::testing::Values("q4", "q6", "nvfp4", "fp8", "fp8-all"));

TEST(Pack, SetOverridesReachTheirClassesOnly) {
  const std::string pack = quantize_fixture("sets", tiny_a(), "q4", {"attn=q8", "experts.down=fp8", "sc=raw"});
  const Checkpoint ck = Checkpoint::open(pack);
  const LayerWeights& L = ck.weights.layers[1];
  EXPECT_EQ(L.q.dtype, DType::kQ8);
  EXPECT_EQ(L.o.dtype, DType::kQ8);
  EXPECT_EQ(L.gate.dtype, DType::kBF16);
  EXPECT_EQ(L.experts_gate_up.dtype, DType::kQ4);
  EXPECT_EQ(L.experts_down.dtype, DType::kFp8);
  EXPECT_EQ(L.router_proj.dtype, DType::kBF16);
  EXPECT_EQ(ck.weights.sc_gate.dtype, DType::kBF16);
  EXPECT_EQ(ck.pack->sets.size(), 3u);
}

TEST(Pack, TwoRunsAreByteIdentical) {
  const std::string a = quantize_fixture("det-a", tiny_a(), "nvfp4", {"attn=q4"});
  const std::string b = quantize_fixture("det-b", tiny_a(), "nvfp4", {"attn=q4"});
  for (const char* f : {kPackManifestFile, kPackBlobFile, "config.json"}) {
    const std::vector<uint8_t> x = read_bytes(a + "/" + f), y = read_bytes(b + "/" + f);
    EXPECT_FALSE(x.empty()) << f;
    EXPECT_TRUE(x == y) << f << " differs between two runs";
  }
}

TEST(Pack, ForceReplacesAPack) {
  const std::string pack = quantize_fixture("force", tiny_a(), "q4");
  QuantizeOptions o;
  o.model_dir = tiny_a();
  o.out_dir = pack;
  o.profile = "fp8";
  EXPECT_THROW(quantize_model(o), dg::Error);
  EXPECT_EQ(open_pack(pack).manifest.profile, "q4") << "a refused run leaves the pack alone";
  o.force = true;
  quantize_model(o);
  EXPECT_EQ(open_pack(pack).manifest.profile, "fp8");
}

}  // namespace pack_roundtrip_test
}  // namespace dg::test
