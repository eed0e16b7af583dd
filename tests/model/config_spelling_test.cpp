// The legacy global_head_dim / num_global_key_value_heads spelling of config.json (which transformers verified
// equal when it made the fixture) resolves to the same model as the per_layer_config spelling it saved.
#include <gtest/gtest.h>

#include <filesystem>

#include "model/model_harness.h"
#include "support/compare.h"
#include "support/paths.h"

namespace dg::test {
namespace config_spelling_test {

TEST(ConfigSpelling, GlobalStyleConfigGivesTheSameLogits) {
  for (const std::string name : {"tiny_a", "tiny_b"}) {
    DG_REQUIRE_FIXTURE(name);
    const RefFixture fx = RefFixture::load(name);
    ASSERT_TRUE(fx.meta.at("global_style_equal").get<bool>()) << "transformers saw the spellings differ";
    namespace fs = std::filesystem;
    const fs::path dir = scratch_dir("spelling-" + name);
    for (const auto& f : fs::directory_iterator(fx.ckpt_dir)) {
      const std::string fname = f.path().filename().string();
      if (fname == "config.json" || fname == "config.global_style.json") continue;
      fs::create_symlink(f.path(), dir / fname);
    }
    fs::copy_file(fs::path(fx.ckpt_dir) / "config.global_style.json", dir / "config.json");
    ModelRig a(fx.ckpt_dir), b(dir.string());
    ASSERT_EQ(a.ck.config.layers.size(), b.ck.config.layers.size());
    for (size_t l = 0; l < a.ck.config.layers.size(); ++l) {
      EXPECT_EQ(a.ck.config.layers[l].head_dim, b.ck.config.layers[l].head_dim) << l;
      EXPECT_EQ(a.ck.config.layers[l].n_kv_heads, b.ck.config.layers[l].n_kv_heads) << l;
      EXPECT_EQ(a.ck.config.rope_inv_freq(static_cast<int>(l)), b.ck.config.rope_inv_freq(static_cast<int>(l))) << l;
    }
    const auto prompt = read_i32(fx.dumps_f32, "prompt"), canvas = read_i32(fx.dumps_f32, "canvas");
    std::vector<std::vector<float>> out;
    for (ModelRig* e : {&a, &b}) {
      KvCache kv = e->new_cache();
      e->model->encode(kv, prompt);
      Tensor logits = e->be->alloc(Shape{static_cast<int64_t>(canvas.size()), e->ck.config.vocab});
      e->model->denoise(kv, canvas, ScInput{ScKind::kZero}, logits);
      out.emplace_back(logits.f32(), logits.f32() + logits.numel());
    }
    EXPECT_EQ(out[0], out[1]) << name;
  }
}

}  // namespace config_spelling_test
}  // namespace dg::test
