// Recorded generate() runs replayed teacher-forced, step by step (SPEC.md §6.6): every step is fed the recorded
// canvas and self-conditioning logits; the engine's logits must agree within tolerance, and the sampler's decisions
// (temperature, argmax, entropy-bound accept, categorical draws from our LCG, renoise, stop) must reproduce the
// recording exactly except where the recorded margin is below a documented epsilon. The same replay runs on every
// backend: the CPU reference in f32 against the f32 recording, and the CUDA backend (default kernels, bf16
// activations, f16 KV) with its own bounds; the backend's own row statistics and categorical draws make the
// decisions. The measured worst values are printed so one GPU run calibrates the CUDA bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iostream>

#include "diffusion/sampler.h"
#include "model/model_harness.h"
#include "model/parity_tolerances.h"
#include "support/compare.h"

#if defined(DG_WITH_CUDA)
#include "core/cuda/cuda_check.h"
#endif

namespace dg::test {
namespace trace_replay_test {

struct ReplayCase {
  std::string fixture, backend;
};

void PrintTo(const ReplayCase& c, std::ostream* os) { *os << c.fixture << " on " << c.backend; }

std::string case_name(const ::testing::TestParamInfo<ReplayCase>& info) {
  std::string b = info.param.backend;  // "Cpu", "Cuda": the GPU test filters (*Cuda*) pick the CUDA cases
  b[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(b[0])));
  return info.param.fixture + "_" + b;
}

struct ReplayBounds {
  double logit_max_abs;  // negative: not checked (bf16 backends are held to the cosine)
  double min_cosine;     // per step, over the whole [canvas, vocab] logits
  double argmax_eps, entropy_eps, draw_eps;  // flips allowed only below these recorded margins
};

// "cpubf16": the CPU reference in the GPU's storage precision (bf16 activations, f16 KV), held to the CUDA bounds:
// it shows in CI how far storage rounding alone moves the random tiny fixtures.
bool is_cpu(const std::string& backend) { return backend == "cpu" || backend == "cpubf16"; }

ReplayBounds bounds_for(const std::string& backend) {
  if (backend == "cpu") return {kF32LogitMaxAbs, kF32MinCosine, kArgmaxMarginEps, kEntropyEps, kDrawMarginEps};
  return {-1.0, kCudaReplayMinCosine, kCudaArgmaxMarginEps, kCudaEntropyEps, kCudaDrawMarginEps};
}

Precision precision_for(const std::string& backend) {
  return backend == "cpubf16" ? Precision{Storage::kBF16, Storage::kF16} : Precision{};
}

// Worst values over a fixture's replay; the flip margins are the largest recorded margin at which a flip happened.
struct Tally {
  int steps = 0, logit_steps = 0, argmax_flips = 0, accept_flips = 0, draw_flips = 0, rows = 0;
  double worst_logit = 0, worst_cosine = 1, worst_entropy = 0;
  double argmax_flip_margin = 0, accept_flip_margin = 0, draw_flip_margin = 0;
  void print(const ReplayCase& c) const {
    std::cout << c.fixture << " on " << c.backend << ": replayed " << steps << " steps (" << logit_steps
              << " with logits, " << rows << " rows); worst logit |diff| " << worst_logit << ", worst step 1 - cosine "
              << 1 - worst_cosine << ", worst |entropy diff| " << worst_entropy
              << "; flips (largest recorded margin): argmax "
              << argmax_flips << " (" << argmax_flip_margin << "), accept " << accept_flips << " ("
              << accept_flip_margin << "), draw " << draw_flips << " (" << draw_flip_margin << ")\n";
  }
};

bool device_missing(const std::string& backend) {
  if (is_cpu(backend)) return false;
#if defined(DG_WITH_CUDA)
  return cuda_device_count() == 0;
#else
  return true;
#endif
}

class TraceReplay : public ::testing::TestWithParam<ReplayCase> {};

TEST_P(TraceReplay, TeacherForcedStepsMatchTheRecording) {
  const ReplayCase& pc = GetParam();
  if (device_missing(pc.backend)) GTEST_SKIP() << "no CUDA device (or a build without CUDA): " << pc.backend;
  DG_REQUIRE_FIXTURE(pc.fixture);
  const RefFixture fx = RefFixture::load(pc.fixture);
  const ReplayBounds bound = bounds_for(pc.backend);
  ModelRig e(fx.ckpt_dir, precision_for(pc.backend), is_cpu(pc.backend) ? "cpu" : pc.backend);
  const ModelConfig& cfg = e.ck.config;
  const int64_t C = cfg.canvas, V = cfg.vocab;
  const auto uC = static_cast<size_t>(C);
  Tally tally;
  for (const RefRun& run : fx.runs) {
    SCOPED_TRACE(run.name);
    SamplerOptions opt = make_sampler_options(SamplerProfile::kReference, e.ck.generation, cfg.pad_id, cfg.bos_id);
    opt.steps = run.steps;
    opt.stability_threshold = run.stability_threshold;
    opt.confidence_threshold = run.confidence_threshold;
    opt.stop_ids = run.eos;
    KvCache kv = e.new_cache();
    e.model->encode(kv, run.prompt);
    Lcg rng(run.seed);
    const size_t P = run.prompt.size();
    Tensor logits = e.be->alloc_f32(Shape{C, V});                   // [canvas, vocab] f32
    Tensor sc = e.be->alloc(Shape{C, V}), ours_tempered = e.be->alloc(Shape{C, V});  // activation storage
    std::vector<float> tempered(static_cast<size_t>(C * V)), ours(static_cast<size_t>(C * V));
    for (size_t b = 0; b < run.steps_per_block.size(); ++b) {
      if (b > 0) {
        const std::vector<int32_t> prev(run.sequence.begin() + static_cast<long>(P + (b - 1) * C),
                                        run.sequence.begin() + static_cast<long>(P + b * C));
        e.model->encode(kv, prev);
      }
      std::vector<int32_t> canvas(uC);
      for (int32_t& t : canvas) t = rng.randint(V);
      StopState stopper(opt, static_cast<int>(C));
      std::vector<int32_t> last_argmax;
      for (int s = 0; s < run.steps_per_block[b]; ++s) {
        const std::string key = run.name + ".b" + std::to_string(b) + ".s" + std::to_string(s);
        const auto canvas_in = read_i32(fx.traces, key + ".canvas_in");
        ASSERT_EQ(canvas, canvas_in) << key << ": the LCG canvas stream diverged from the recording";
        const float T = schedule_temperature(run.steps - s, run.steps, opt.t_min, opt.t_max);
        ASSERT_EQ(static_cast<double>(T), run.T[b][static_cast<size_t>(s)]) << key << ": temperature";
        const auto rec_argmax = read_i32(fx.traces, key + ".argmax");
        const auto rec_accept = read_u8(fx.traces, key + ".accept");
        const auto rec_denoised = read_i32(fx.traces, key + ".denoised");
        const auto rec_out = read_i32(fx.traces, key + ".canvas_out");
        const auto rec_h = read_f32(fx.traces, key + ".entropy");
        const auto rec_margin = read_f32(fx.traces, key + ".margin");
        const auto rec_draw_margin = read_f32(fx.traces, key + ".draw_margin");
        ++tally.steps;
        // The sampler on the recorded entropies reproduces the recorded accept mask.
        const auto accept_rec_h = entropy_bound_accept(rec_h, opt.entropy_bound);
        EXPECT_EQ(std::vector<uint8_t>(accept_rec_h.begin(), accept_rec_h.end()), rec_accept) << key;
        // The uniforms of this step's categorical draws, then the renoise ids, in the recorded order.
        std::vector<double> u(uC);
        for (double& x : u) x = rng.uniform();
        if (run.has_logits) {
          ++tally.logit_steps;
          tally.rows += static_cast<int>(C);
          const auto rec_logits = read_f32(fx.traces, key + ".logits");
          const ScInput in = s == 0 ? ScInput{ScKind::kZero} : ScInput{ScKind::kLogits, &sc, 0.0f};
          e.model->denoise(kv, canvas, in, logits);
          e.be->copy_to_host(logits, ours.data());
          const Diff d = compare(ours, rec_logits, bound.logit_max_abs);
          tally.worst_logit = std::max(tally.worst_logit, d.max_abs);
          tally.worst_cosine = std::min(tally.worst_cosine, d.cosine);
          EXPECT_TRUE(d.finite) << key;
          if (bound.logit_max_abs >= 0) {
            EXPECT_LE(d.max_abs, bound.logit_max_abs) << key << " " << d.str();
          }
          EXPECT_GE(d.cosine, bound.min_cosine) << key << " " << d.str();
          std::vector<RowStats> our_stats(uC), ref(uC);
          e.be->row_stats(logits, T, ours_tempered, our_stats.data());
          row_stats_cpu(rec_logits.data(), C, V, T, tempered.data(), ref.data());
          std::vector<float> h(uC);
          for (size_t r = 0; r < uC; ++r) {
            EXPECT_EQ(ref[r].argmax, rec_argmax[r]) << key << " row " << r << ": argmax of the recorded logits";
            EXPECT_NEAR(ref[r].entropy, rec_h[r], 1e-5) << key << " row " << r;
            tally.worst_entropy = std::max<double>(tally.worst_entropy, std::fabs(our_stats[r].entropy - rec_h[r]));
            if (our_stats[r].argmax != rec_argmax[r]) {
              ++tally.argmax_flips;
              tally.argmax_flip_margin = std::max<double>(tally.argmax_flip_margin, rec_margin[r]);
              EXPECT_LT(rec_margin[r], bound.argmax_eps) << key << " row " << r << ": argmax flip at a wide margin";
            }
            h[r] = our_stats[r].entropy;
          }
          const auto accept_ours = entropy_bound_accept(h, opt.entropy_bound);
          if (std::vector<uint8_t>(accept_ours.begin(), accept_ours.end()) != rec_accept) {
            ++tally.accept_flips;
            const double m = accept_margin(rec_h, opt.entropy_bound);
            tally.accept_flip_margin = std::max(tally.accept_flip_margin, m);
            EXPECT_LT(m, bound.entropy_eps) << key << ": accept flip at a wide margin";
          }
          // Categorical draws: on the recorded probabilities (the sampler's arithmetic, exact but for CDF
          // near-ties) and by the backend on its own logits (within the backend's bound).
          std::vector<int32_t> drawn(uC);
          e.be->categorical(logits, T, u, drawn.data());
          for (size_t r = 0; r < uC; ++r) {
            const int32_t from_rec = categorical_draw(tempered.data() + r * static_cast<size_t>(V), V, u[r]);
            if (from_rec != rec_denoised[r]) {
              EXPECT_LT(rec_draw_margin[r], kDrawMarginEps) << key << " row " << r << ": draw on the recorded logits";
            }
            if (drawn[r] != rec_denoised[r]) {
              ++tally.draw_flips;
              tally.draw_flip_margin = std::max<double>(tally.draw_flip_margin, rec_draw_margin[r]);
              EXPECT_LT(rec_draw_margin[r], bound.draw_eps) << key << " row " << r << ": draw flip at a wide margin";
            }
          }
          // Self-conditioning for the next step: the recorded logits over the recorded temperature.
          e.be->copy_from_host(tempered.data(), sc);
        }
        for (size_t r = 0; r < uC; ++r) {
          const int32_t noise = rng.randint(V);
          canvas[r] = rec_accept[r] ? rec_denoised[r] : noise;
        }
        EXPECT_EQ(canvas, rec_out) << key << ": renoise";
        canvas = rec_out;
        double hs = 0;
        for (float v : rec_h) hs += v;
        const StopRule rule = stopper.update(rec_argmax, rec_accept, static_cast<float>(hs / C), s + 1);
        EXPECT_EQ(rule != StopRule::kNone, static_cast<bool>(run.stop[b][static_cast<size_t>(s)])) << key << ": stop";
        last_argmax = rec_argmax;
      }
      // The committed block is the last step's argmax.
      const size_t off = P + b * uC;
      for (size_t r = 0; r < uC && off + r < run.sequence.size(); ++r) {
        const int32_t want = run.sequence[off + r];
        if (want == opt.pad_id && b + 1 == run.steps_per_block.size()) break;  // padding after the final eos
        EXPECT_EQ(last_argmax[r], want) << run.name << " block " << b << " row " << r;
      }
    }
  }
  tally.print(pc);
}

// The contract profile's model inputs on the recorded canvases (the first block of every run with logits): step 1
// self-conditions on the canvas's own embedding (ScKind::kSelfEmbed), later steps on the recorded logits over T
// through the sparse survivor path (e^-10 cutoff). The recording is transformers' reference semantics, so the
// oracle here is the CPU reference with the GPU's storage roundings; the decisions after the statistics are host
// code shared by both backends.
TEST(TraceReplayContract, CudaMatchesTheCpuReferenceOnTheContractInputs) {
  if (device_missing("cuda")) GTEST_SKIP() << "no CUDA device (or a build without CUDA)";
  DG_REQUIRE_FIXTURE("tiny_a");
  const RefFixture fx = RefFixture::load("tiny_a");
  ModelRig cpu(fx.ckpt_dir, Precision{Storage::kBF16, Storage::kF16}, "cpu"), gpu(fx.ckpt_dir, {}, "cuda");
  const ModelConfig& cfg = cpu.ck.config;
  const int64_t C = cfg.canvas, V = cfg.vocab;
  const SamplerOptions opt = make_sampler_options(SamplerProfile::kContract, cpu.ck.generation, cfg.pad_id, cfg.bos_id);
  ASSERT_TRUE(opt.first_step_self_embed);
  ASSERT_GT(opt.sc_sparse_cutoff, 0.0);
  double worst_cos = 1;
  int steps = 0, rows = 0, same = 0;
  for (const RefRun& run : fx.runs) {
    if (!run.has_logits) continue;
    SCOPED_TRACE(run.name);
    ModelRig* sides[2] = {&cpu, &gpu};
    std::vector<KvCache> kv;
    std::vector<Tensor> logits, sc;
    for (ModelRig* e : sides) {
      kv.push_back(e->new_cache());
      e->model->encode(kv.back(), run.prompt);
      logits.push_back(e->be->alloc_f32(Shape{C, V}));
      sc.push_back(e->be->alloc(Shape{C, V}));
    }
    std::vector<float> tempered(static_cast<size_t>(C * V)), out[2];
    std::vector<RowStats> stats[2], ref(static_cast<size_t>(C));
    for (int s = 0; s < run.steps_per_block[0]; ++s) {
      const std::string key = run.name + ".b0.s" + std::to_string(s);
      const auto canvas = read_i32(fx.traces, key + ".canvas_in");
      const float T = static_cast<float>(run.T[0][static_cast<size_t>(s)]);
      for (int i = 0; i < 2; ++i) {
        const ScInput in = s == 0 ? ScInput{ScKind::kSelfEmbed}
                                  : ScInput{ScKind::kLogits, &sc[i], static_cast<float>(opt.sc_sparse_cutoff)};
        sides[i]->model->denoise(kv[i], canvas, in, logits[i]);
        out[i].resize(static_cast<size_t>(C * V));
        sides[i]->be->copy_to_host(logits[i], out[i].data());
        stats[i].resize(static_cast<size_t>(C));
        Tensor t = sides[i]->be->alloc(Shape{C, V});
        sides[i]->be->row_stats(logits[i], T, t, stats[i].data());
      }
      const Diff d = compare(out[1], out[0]);
      worst_cos = std::min(worst_cos, d.cosine);
      EXPECT_TRUE(d.finite) << key;
      EXPECT_GE(d.cosine, kCudaContractMinCosine) << key << " " << d.str();
      for (size_t r = 0; r < static_cast<size_t>(C); ++r) same += stats[0][r].argmax == stats[1][r].argmax;
      rows += static_cast<int>(C);
      ++steps;
      // Next step's self-conditioning on both sides: the recorded logits over T, in the activation storage.
      row_stats_cpu(read_f32(fx.traces, key + ".logits").data(), C, V, T, tempered.data(), ref.data());
      for (int i = 0; i < 2; ++i) sides[i]->be->copy_from_host(tempered.data(), sc[i]);
    }
  }
  std::cout << "contract inputs, tiny_a, CUDA vs CPU (bf16/f16): " << steps << " steps, worst step cosine "
            << worst_cos << ", argmax agreement " << same << "/" << rows << "\n";
  EXPECT_GT(steps, 0);
  EXPECT_GE(same, rows * 8 / 10);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TraceReplay,
                         ::testing::Values(ReplayCase{"tiny_a", "cpu"}, ReplayCase{"tiny_b", "cpu"},
                                           ReplayCase{"tiny_a", "cpubf16"}, ReplayCase{"tiny_b", "cpubf16"},
                                           ReplayCase{"tiny_a", "cuda"}, ReplayCase{"tiny_b", "cuda"}),
                         case_name);

}  // namespace trace_replay_test
}  // namespace dg::test
