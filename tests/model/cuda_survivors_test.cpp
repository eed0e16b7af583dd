// The survivor self-conditioning in the batched denoiser's steps (CudaKernels::sc_survivors; soft_embed_cuda's
// survivor path) against the product over the whole vocabulary, on the trained embedded model with the contract
// sampler's cutoff: three sequences, three steps (zero self-conditioning, then on their logits). The two differ
// only in how the survivors' sum is rounded (f32 sums of f32 probabilities against a bf16 product), so the
// statistics agree closely, and they must differ somewhere: the survivor path ran. A lone sequence's steps replay
// a captured graph, where the product is a graph branch taken where a row overflows: with a cap of 1 (some row
// always overflows) the branch gives the product's bits, and with the full cap the graph gives the ungraphed
// survivor path's. Skipped without a GPU.
#include <gtest/gtest.h>

#if defined(DG_WITH_CUDA)
#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "diffusion/batch.h"
#include "diffusion/options.h"
#include "model/model_harness.h"
#include "ops/self_cond/self_cond.h"
#include "support/paths.h"

namespace dg::test {
namespace cuda_survivors_test {

// Steps of sequences with canvases of `parts` (halves of the model's canvas) through the batched denoiser.
std::vector<RowStats> batched_steps(int cap, const std::vector<int64_t>& parts = {2, 1, 2}, bool graphs = true,
                                    int steps = 3) {
  CudaKernels k;
  k.sc_survivors = cap;
  ModelRig e(source_path("models/dg-tiny"), {}, "cuda", k);
  e.model->set_graphs(graphs);
  const int64_t V = e.ck.config.vocab, C = e.ck.config.canvas;
  ModelBatchDenoiser d(*e.model);
  std::vector<int64_t> sizes;
  for (int64_t h : parts) sizes.push_back(C * h / 2);
  std::vector<KvCache> caches;
  std::vector<int> seqs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    caches.push_back(e.new_cache(1024));
    e.model->encode(caches.back(), pattern_ids(11 + 17 * static_cast<int>(i), static_cast<int>(i), V));
    seqs.push_back(d.open());
  }
  std::vector<RowStats> out;
  for (int step = 0; step < steps; ++step) {
    std::vector<std::vector<int32_t>> canvases;
    std::vector<std::vector<RowStats>> stats;
    for (size_t i = 0; i < sizes.size(); ++i) {
      canvases.push_back(pattern_ids(static_cast<int>(sizes[i]), 30 + 3 * step + static_cast<int>(i), V));
      stats.emplace_back(static_cast<size_t>(sizes[i]));
    }
    std::vector<BatchItem> items;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const StepRequest rq{canvases[i], step == 0 ? ScKind::kZero : ScKind::kLogits, 0.8f,
                           static_cast<float>(kSparseScCutoff)};
      items.push_back(BatchItem{seqs[i], &caches[i], rq, stats[i].data(), nullptr});
    }
    d.denoise(items);
    for (const auto& s : stats) out.insert(out.end(), s.begin(), s.end());
  }
  return out;
}

TEST(CudaSurvivorSc, BatchedStepsAgreeWithTheProduct) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const std::vector<RowStats> dense = batched_steps(0), surv = batched_steps(kSurvivorCapMax);
  ASSERT_EQ(dense.size(), surv.size());
  size_t same_argmax = 0, differ = 0;
  double worst = 0;
  for (size_t r = 0; r < dense.size(); ++r) {
    same_argmax += dense[r].argmax == surv[r].argmax;
    differ += dense[r].entropy != surv[r].entropy;
    worst = std::max(worst, std::fabs(static_cast<double>(dense[r].entropy) - surv[r].entropy));
  }
  std::cout << "  " << dense.size() << " rows: argmax equal " << same_argmax << ", entropies differ in " << differ
            << ", worst |entropy difference| " << worst << "\n";
  EXPECT_GE(same_argmax, dense.size() * 97 / 100);
  EXPECT_LT(worst, 0.05);
  EXPECT_GT(differ, 0u) << "the survivor path must have run on the steps conditioned on logits";
}

bool same_bits(const std::vector<RowStats>& a, const std::vector<RowStats>& b) {
  if (a.size() != b.size()) return false;
  for (size_t r = 0; r < a.size(); ++r)
    if (a[r].argmax != b[r].argmax || a[r].entropy != b[r].entropy || a[r].p_max != b[r].p_max) return false;
  return true;
}

TEST(CudaSurvivorSc, GraphedStepsTakeTheBranch) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const std::vector<int64_t> lone = {2};
  const std::vector<RowStats> dense = batched_steps(0, lone, true, 4), branch = batched_steps(1, lone, true, 4),
                              graphed = batched_steps(kSurvivorCapMax, lone, true, 4),
                              plain = batched_steps(kSurvivorCapMax, lone, false, 4);
  EXPECT_TRUE(same_bits(dense, branch)) << "the branch must give the product's statistics";
  EXPECT_TRUE(same_bits(graphed, plain)) << "the graph must give the ungraphed survivor path's statistics";
  EXPECT_FALSE(same_bits(dense, graphed)) << "the survivor path must have run in the graph";
}

}  // namespace cuda_survivors_test
}  // namespace dg::test
#endif
