// The lm_head's softcap taken by the row statistics on the CUDA backend (CudaKernels::softcap_in_stats:
// Backend::lm_head_open, row_stats_open) against lm_head then row_stats, on a batched step's rows: two sequences'
// rows of one lm_head call finished in two parts from their offsets, one storing the finished logits back (a draw
// follows) and one not; the bf16 table and the fp8 one (--vocab-act fp8, whose row scales are per input row).
// Statistics, tempered logits and the stored logits bit for bit; then the batched denoiser's steps with the option on
// and off (statistics and draws bit for bit); single sequences' generations with it on and off (the same tokens).
// And with the option off (--softcap-pass) nothing is left open.
// Skipped without a GPU.
#include <gtest/gtest.h>

#if defined(DG_WITH_CUDA)
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/cuda/cuda_check.h"
#include "diffusion/batch.h"
#include "diffusion/generate.h"
#include "diffusion/options.h"
#include "model/model_harness.h"
#include "model/weights.h"
#include "support/paths.h"

namespace dg::test {
namespace cuda_softcap_stats_test {

void open_matches_the_pass(bool fp8_table) {
  SCOPED_TRACE(fp8_table ? "fp8 table" : "bf16 table");
  CudaKernels k;
  k.softcap_in_stats = true;
  ModelRig e(source_path("models/dg-tiny"), {}, "cuda", k);
  if (fp8_table) set_vocab_act(e.weights, *e.be, "fp8");
  const int64_t V = e.ck.config.vocab, C = e.ck.config.canvas;
  std::vector<KvCache> caches;
  for (int i = 0; i < 2; ++i) {
    caches.push_back(e.new_cache(1024));
    e.model->encode(caches.back(), pattern_ids(7 + 30 * i, i, V));
  }
  const std::vector<std::vector<int32_t>> canvases = {pattern_ids(static_cast<int>(C), 4, V),
                                                      pattern_ids(static_cast<int>(C / 2), 5, V)};
  const std::vector<DenoiseSeq> seqs = {DenoiseSeq{&caches[0], canvases[0], ScInput{ScKind::kZero}},
                                        DenoiseSeq{&caches[1], canvases[1], ScInput{ScKind::kSelfEmbed}}};
  const Tensor y = e.model->denoise_batch(seqs);
  const int64_t rows = C + C / 2;
  Tensor open_l = e.be->alloc_f32(Shape{rows, V}), plain_l = e.be->alloc_f32(Shape{rows, V});
  const OpenLogits open = e.model->lm_head_rows_open(y, open_l);
  ASSERT_TRUE(open.open);
  EXPECT_EQ(open.row_scale.empty(), !fp8_table);
  e.model->lm_head_rows(y, plain_l);
  int64_t row0 = 0;
  for (size_t i = 0; i < canvases.size(); ++i) {
    const auto n = static_cast<int64_t>(canvases[i].size());
    const bool finish = i == 1;
    SCOPED_TRACE("sequence " + std::to_string(i) + (finish ? ", finished" : ""));
    Tensor po = row_slice(open_l, row0, n), pp = row_slice(plain_l, row0, n);
    Tensor to = e.be->alloc_tempered(Shape{n, V}), tp = e.be->alloc_tempered(Shape{n, V});
    std::vector<RowStats> so(static_cast<size_t>(n)), sp(static_cast<size_t>(n));
    e.be->row_stats_open(po, open, row0, 0.8f, to, so.data(), finish);
    e.be->row_stats(pp, 0.8f, tp, sp.data());
    for (size_t r = 0; r < so.size(); ++r) {
      EXPECT_EQ(so[r].argmax, sp[r].argmax) << "row " << r;
      EXPECT_EQ(std::memcmp(&so[r].entropy, &sp[r].entropy, 4), 0) << "row " << r;
      EXPECT_EQ(std::memcmp(&so[r].p_max, &sp[r].p_max, 4), 0) << "row " << r;
    }
    EXPECT_EQ(to_host(*e.be, to), to_host(*e.be, tp)) << "tempered logits";
    const std::vector<float> got = to_host(*e.be, po), want = to_host(*e.be, pp);
    if (finish)
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << "finished logits";
    else
      EXPECT_NE(got, want) << "sums left open are not the finished logits";
    row0 += n;
  }
}

TEST(CudaSoftcapInStats, GivesTheSoftcapPassesStatisticsBitForBit) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  open_matches_the_pass(false);
  open_matches_the_pass(true);
}

// Three steps of three sequences (canvases C, C / 2 and C; self-conditioning zero, then on their logits) through
// the batched denoiser, the second drawing its tokens from the logits, on a rig with the softcap in the statistics
// and one without: every statistic and draw bit for bit.
struct Steps {
  std::vector<RowStats> stats;
  std::vector<int32_t> drawn;
};
Steps batched_steps(bool in_stats) {
  CudaKernels k;
  k.softcap_in_stats = in_stats;
  ModelRig e(source_path("models/dg-tiny"), {}, "cuda", k);
  const int64_t V = e.ck.config.vocab, C = e.ck.config.canvas;
  ModelBatchDenoiser d(*e.model);
  const std::vector<int64_t> sizes = {C, C / 2, C};
  std::vector<KvCache> caches;
  std::vector<int> seqs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    caches.push_back(e.new_cache(1024));
    e.model->encode(caches.back(), pattern_ids(11 + 17 * static_cast<int>(i), static_cast<int>(i), V));
    seqs.push_back(d.open());
  }
  Steps out;
  for (int step = 0; step < 3; ++step) {
    std::vector<std::vector<int32_t>> canvases;
    std::vector<std::vector<RowStats>> stats;
    std::vector<std::vector<int32_t>> drawn;
    std::vector<double> u(static_cast<size_t>(sizes[1]));
    for (size_t r = 0; r < u.size(); ++r) u[r] = (static_cast<double>(r) + 0.5) / static_cast<double>(u.size());
    std::vector<BatchItem> items;
    for (size_t i = 0; i < sizes.size(); ++i) {
      canvases.push_back(pattern_ids(static_cast<int>(sizes[i]), 30 + 3 * step + static_cast<int>(i), V));
      stats.emplace_back(static_cast<size_t>(sizes[i]));
      drawn.emplace_back(static_cast<size_t>(sizes[i]), -1);
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      StepRequest rq{canvases[i], step == 0 ? ScKind::kZero : ScKind::kLogits, 0.8f};
      if (i == 1) rq.u = u;
      items.push_back(BatchItem{seqs[i], &caches[i], rq, stats[i].data(), i == 1 ? drawn[i].data() : nullptr});
    }
    d.denoise(items);
    for (size_t i = 0; i < sizes.size(); ++i) {
      out.stats.insert(out.stats.end(), stats[i].begin(), stats[i].end());
      if (i == 1) out.drawn.insert(out.drawn.end(), drawn[i].begin(), drawn[i].end());
    }
  }
  return out;
}

TEST(CudaSoftcapInStats, BatchedStepsGiveTheSameStatisticsAndDraws) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Steps pass = batched_steps(false), in_stats = batched_steps(true);
  ASSERT_EQ(pass.stats.size(), in_stats.stats.size());
  for (size_t r = 0; r < pass.stats.size(); ++r) {
    ASSERT_EQ(pass.stats[r].argmax, in_stats.stats[r].argmax) << "row " << r;
    ASSERT_EQ(std::memcmp(&pass.stats[r].entropy, &in_stats.stats[r].entropy, 4), 0) << "row " << r;
    ASSERT_EQ(std::memcmp(&pass.stats[r].p_max, &in_stats.stats[r].p_max, 4), 0) << "row " << r;
  }
  EXPECT_EQ(pass.drawn, in_stats.drawn);
  EXPECT_EQ(std::count(pass.drawn.begin(), pass.drawn.end(), -1), 0) << "every row of the drawing sequence drew";
}

// Single sequences (ModelDenoiser: ask, chat, the serial worker) leave the softcap to the statistics too, their
// graphed steps included: generate() with the option on and off, on the device's decisions and on the host's, with
// argmax and with categorical draws, commits the same tokens.
std::vector<int32_t> single_run(bool in_stats, SamplerProfile profile, bool host) {
  CudaKernels k;
  k.softcap_in_stats_single = in_stats;
  ModelRig e(source_path("models/dg-tiny"), {}, "cuda", k);
  EXPECT_EQ(e.be->open_single_logits(), in_stats);
  const ModelConfig& cfg = e.ck.config;
  SamplerOptions o = make_sampler_options(profile, e.ck.generation, cfg.pad_id, cfg.bos_id);
  o.seed = 5;
  o.steps = 6;
  o.max_new_tokens = 3 * cfg.canvas;
  o.stop_ids.clear();
  o.host_decisions = host;
  KvCache kv = e.new_cache(1024);
  return generate(*e.model, kv, pattern_ids(40, 3, cfg.vocab), o).committed;
}

TEST(CudaSoftcapInStats, SingleSequenceGenerationsGiveTheSameTokens) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  for (const SamplerProfile profile : {SamplerProfile::kContract, SamplerProfile::kReference})
    for (const bool host : {false, true}) {
      const std::vector<int32_t> pass = single_run(false, profile, host);
      EXPECT_FALSE(pass.empty());
      EXPECT_EQ(single_run(true, profile, host), pass) << sampler_profile_name(profile) << (host ? ", host" : "");
    }
}

TEST(CudaSoftcapInStats, OffLeavesNothingOpen) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  CudaKernels k;
  k.softcap_in_stats = false;  // --softcap-pass
  ModelRig e(source_path("models/dg-tiny"), {}, "cuda", k);
  const int64_t V = e.ck.config.vocab;
  KvCache kv = e.new_cache(256);
  e.model->encode(kv, pattern_ids(9, 1, V));
  const std::vector<int32_t> canvas = pattern_ids(16, 2, V);
  const std::vector<DenoiseSeq> seqs = {DenoiseSeq{&kv, canvas, ScInput{ScKind::kZero}}};
  const Tensor y = e.model->denoise_batch(seqs);
  Tensor l = e.be->alloc_f32(Shape{16, V});
  EXPECT_FALSE(e.model->lm_head_rows_open(y, l).open);
}

}  // namespace cuda_softcap_stats_test
}  // namespace dg::test
#endif
