// The fused commit on the CUDA backend (Model::commit_denoise_ids; --fused-commit) against the encode pass and the
// denoise step apart on the same backend: the products see twice the rows (cuBLAS may pick another algorithm), so
// the canvas's logits are held to a cosine, not equality; generate() with it, graphed as ask runs it, gives finite,
// mostly equal tokens. Skipped without a GPU.
#include <gtest/gtest.h>

#if defined(DG_WITH_CUDA)
#include <algorithm>
#include <iostream>

#include "core/cuda/cuda_check.h"
#include "diffusion/generate.h"
#include "model/model_harness.h"
#include "support/compare.h"
#include "support/paths.h"

namespace dg::test {
namespace cuda_fused_commit_test {

void fused_matches_apart(const std::string& dir) {
  ModelRig e(dir, {}, "cuda");
  const ModelConfig& cfg = e.ck.config;
  const int C = cfg.canvas;
  for (const int ctx : {7, 3 * static_cast<int>(cfg.window) + 5}) {
    KvCache apart = e.new_cache(1024), fused = e.new_cache(1024);
    const std::vector<int32_t> prompt = pattern_ids(ctx, 1, cfg.vocab);
    e.model->encode(apart, prompt);
    e.model->encode(fused, prompt);
    const std::vector<int32_t> block = pattern_ids(C, 2, cfg.vocab);
    const Tensor ids = e.be->ids(pattern_ids(C, 3, cfg.vocab));
    Tensor la = e.be->alloc_f32(Shape{C, cfg.vocab}), lf = e.be->alloc_f32(Shape{C, cfg.vocab});
    e.model->encode(apart, block);
    e.model->denoise_ids(apart, ids, ScInput{ScKind::kSelfEmbed}, la);
    e.model->commit_denoise_ids(fused, block, ids, ScInput{ScKind::kSelfEmbed}, lf);
    EXPECT_EQ(fused.len(), apart.len());
    const Diff d = compare(to_host(*e.be, lf), to_host(*e.be, la));
    std::cout << "  context " << ctx << ": fused against apart " << d.str() << ", cache fingerprints "
              << (fused.fingerprint() == apart.fingerprint() ? "equal" : "differ") << "\n";
    EXPECT_TRUE(d.finite);
    EXPECT_GE(d.cosine, 0.999) << "context " << ctx;  // the batched forward's bound (tests/model/cuda_batch_test.cpp)
  }
}

TEST(CudaFusedCommit, EmbeddedModelMatchesTheTwoPasses) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  fused_matches_apart(source_path("models/dg-tiny"));
}

TEST(CudaFusedCommit, TinyFixtureMatchesTheTwoPasses) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  fused_matches_apart(source_path("tests/fixtures/tiny_a"));
}

// generate() as ask runs it (graphs, device decisions), with and without the fused commit.
TEST(CudaFusedCommit, GenerateCommitsFiniteTokensThroughGraphs) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  ModelRig e(source_path("models/dg-tiny"), {}, "cuda");
  const ModelConfig& cfg = e.ck.config;
  SamplerOptions o = make_sampler_options(SamplerProfile::kContract, e.ck.generation, cfg.pad_id, cfg.bos_id);
  o.seed = 3;
  o.steps = 8;
  o.max_new_tokens = 6 * cfg.canvas;
  o.stop_ids.clear();
  const std::vector<int32_t> prompt = pattern_ids(50, 4, cfg.vocab);
  std::vector<GenerateResult> res;
  for (const bool on : {false, true}) {
    e.model->set_fused_commit(on);
    KvCache kv = e.new_cache(1024);
    res.push_back(generate(*e.model, kv, prompt, o));
  }
  e.model->set_fused_commit(false);
  const std::vector<int32_t>& a = res[0].committed;
  const std::vector<int32_t>& f = res[1].committed;
  ASSERT_EQ(f.size(), a.size());
  size_t same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i] == f[i];
  std::cout << "  " << same << " of " << a.size() << " committed tokens equal with and without the fused commit\n";
  for (const int32_t t : f) EXPECT_TRUE(t >= 0 && t < cfg.vocab);
  EXPECT_GE(same, a.size() / 2) << "the fused commit's tokens part from the two passes' early";
}

}  // namespace cuda_fused_commit_test
}  // namespace dg::test
#endif
