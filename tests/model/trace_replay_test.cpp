// Recorded generate() runs replayed teacher-forced, step by step (SPEC.md §6.6): every step is fed the recorded
// canvas and self-conditioning logits; the engine's logits must agree within tolerance, and the sampler's decisions
// (temperature, argmax, entropy-bound accept, categorical draws from our LCG, renoise, stop) must reproduce the
// recording exactly except where the recorded margin is below a documented epsilon.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>

#include "diffusion/sampler.h"
#include "model/model_harness.h"
#include "model/parity_tolerances.h"
#include "support/compare.h"

namespace dg::test {
namespace {

struct Tally {
  int steps = 0, logit_steps = 0, argmax_flips = 0, accept_flips = 0, draw_flips = 0;
  double worst_logit = 0;
};

class TraceReplay : public ::testing::TestWithParam<std::string> {};

TEST_P(TraceReplay, TeacherForcedStepsMatchTheRecording) {
  DG_REQUIRE_FIXTURE(GetParam());
  const RefFixture fx = RefFixture::load(GetParam());
  Engine e(fx.ckpt_dir);
  const ModelConfig& cfg = e.ck.config;
  const int64_t C = cfg.canvas, V = cfg.vocab;
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
    Tensor logits = e.be->alloc(Shape{C, V}), sc = e.be->alloc(Shape{C, V});
    std::vector<float> tempered(static_cast<size_t>(C * V)), prev_tempered;
    for (size_t b = 0; b < run.steps_per_block.size(); ++b) {
      if (b > 0) {
        const std::vector<int32_t> prev(run.sequence.begin() + static_cast<long>(P + (b - 1) * C),
                                        run.sequence.begin() + static_cast<long>(P + b * C));
        e.model->encode(kv, prev);
      }
      std::vector<int32_t> canvas(static_cast<size_t>(C));
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
        if (run.has_logits) {
          ++tally.logit_steps;
          const auto rec_logits = read_f32(fx.traces, key + ".logits");
          const ScInput in = s == 0 ? ScInput{ScKind::kZero} : ScInput{ScKind::kLogits, &sc, 0.0f};
          e.model->denoise(kv, canvas, in, logits);
          const Diff d = compare({logits.f32(), static_cast<size_t>(C * V)}, rec_logits, kF32LogitMaxAbs);
          tally.worst_logit = std::max(tally.worst_logit, d.max_abs);
          EXPECT_TRUE(d.finite) << key;
          EXPECT_LE(d.max_abs, kF32LogitMaxAbs) << key << " " << d.str();
          std::vector<RowStats> ours(static_cast<size_t>(C)), ref(static_cast<size_t>(C));
          row_stats_cpu(logits.f32(), C, V, T, nullptr, ours.data());
          row_stats_cpu(rec_logits.data(), C, V, T, tempered.data(), ref.data());
          std::vector<float> h(static_cast<size_t>(C));
          for (int64_t r = 0; r < C; ++r) {
            const auto ur = static_cast<size_t>(r);
            EXPECT_EQ(ref[ur].argmax, rec_argmax[ur]) << key << " row " << r << ": argmax of the recorded logits";
            EXPECT_NEAR(ref[ur].entropy, rec_h[ur], 1e-5) << key << " row " << r;
            if (ours[ur].argmax != rec_argmax[ur]) {
              ++tally.argmax_flips;
              EXPECT_LT(rec_margin[ur], kArgmaxMarginEps) << key << " row " << r << ": argmax flip at a wide margin";
            }
            h[ur] = ours[ur].entropy;
          }
          const auto accept_ours = entropy_bound_accept(h, opt.entropy_bound);
          if (std::vector<uint8_t>(accept_ours.begin(), accept_ours.end()) != rec_accept) {
            ++tally.accept_flips;
            EXPECT_LT(accept_margin(rec_h, opt.entropy_bound), kEntropyEps) << key << ": accept flip at a wide margin";
          }
          // Self-conditioning for the next step: the recorded logits over the recorded temperature.
          std::copy(tempered.begin(), tempered.end(), sc.f32());
        }
        // Categorical draws then the renoise canvas, in the recorded order of LCG consumption.
        for (int64_t r = 0; r < C; ++r) {
          const double u = rng.uniform();
          if (run.has_logits) {
            const int32_t drawn = categorical_draw(tempered.data() + r * V, V, u);
            if (drawn != rec_denoised[static_cast<size_t>(r)]) {
              ++tally.draw_flips;
              EXPECT_LT(rec_draw_margin[static_cast<size_t>(r)], kDrawMarginEps) << key << " row " << r;
            }
          }
        }
        for (int64_t r = 0; r < C; ++r) {
          const auto ur = static_cast<size_t>(r);
          const int32_t noise = rng.randint(V);
          canvas[ur] = rec_accept[ur] ? rec_denoised[ur] : noise;
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
      const size_t off = P + b * static_cast<size_t>(C);
      for (int64_t r = 0; r < C && off + static_cast<size_t>(r) < run.sequence.size(); ++r) {
        const int32_t want = run.sequence[off + static_cast<size_t>(r)];
        if (want == opt.pad_id && b + 1 == run.steps_per_block.size()) break;  // padding after the final eos
        EXPECT_EQ(last_argmax[static_cast<size_t>(r)], want) << run.name << " block " << b << " row " << r;
      }
    }
  }
  std::cout << fx.name << ": replayed " << tally.steps << " steps (" << tally.logit_steps
            << " with logits), worst logit |diff| " << tally.worst_logit << ", argmax flips " << tally.argmax_flips
            << ", accept flips " << tally.accept_flips << ", draw flips " << tally.draw_flips << "\n";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TraceReplay, ::testing::Values("tiny_a", "tiny_b"));

}  // namespace
}  // namespace dg::test
