// The decide op's CPU twin against Generation's host decisions (src/diffusion/stepper.cpp) on random row
// statistics: two Generations, one deciding on the host and one in device-decisions mode driven by the twin, fed
// the same statistics step after step (ties in entropy, all-pad canvases, stable argmax runs, low-entropy tails, a
// control token opening the first block), must keep identical canvases, accept counts, mean entropies, stop
// rules, RNG states, and end with the same committed tokens and BlockInfo.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "diffusion/options.h"
#include "diffusion/stepper.h"
#include "ops/decide/decide.h"

namespace dg {
namespace decide_test {

struct Twin {
  DecideParams p;
  DecideState state;
  std::vector<int32_t> history, canvas;
  std::vector<uint8_t> prev_accept;
  DecideBuffers buffers(std::span<const LcgJump> jump) {
    return DecideBuffers{&state, history.data(), prev_accept.data(), jump.data()};
  }
};

// Statistics of one step: argmax from a small alphabet (often repeating the previous step's), entropies from a
// few values (many exact ties; sometimes the previous step's exactly, so the accept mask repeats), sometimes all
// pad, sometimes a control token in row 0.
struct StatsSource {
  std::mt19937_64 gen;
  std::vector<RowStats> prev;
  std::vector<RowStats> next(int rows, int step, int64_t vocab) {
    std::uniform_int_distribution<int> pick(0, 99);
    std::vector<RowStats> s(static_cast<size_t>(rows));
    const int mode = pick(gen);
    const float levels[] = {0.0f, 1e-4f, 1e-3f, 0.01f, 0.02f, 0.5f, 2.0f};
    const float scale = step > 4 && mode < 60 ? 0.01f : 1.0f;  // late steps are usually confident
    const bool repeat = static_cast<int>(prev.size()) == rows && mode % 3 == 0;
    for (int r = 0; r < rows; ++r) {
      RowStats& x = s[static_cast<size_t>(r)];
      if (mode < 8) {
        x.argmax = 0;  // all pad
      } else if (static_cast<int>(prev.size()) == rows && mode < 70) {
        x.argmax = prev[static_cast<size_t>(r)].argmax;
      } else {
        x.argmax = 3 + static_cast<int32_t>(gen() % static_cast<uint64_t>(std::min<int64_t>(vocab - 3, 9)));
      }
      x.entropy = repeat ? prev[static_cast<size_t>(r)].entropy : levels[gen() % 7] * scale;
      x.p_max = static_cast<float>(gen() % 1000) / 1000.0f;
    }
    if (mode >= 92) s[0].argmax = 2;  // bos opens the canvas: a first block re-rolls
    prev = s;
    return s;
  }
};

struct Outcome {
  GenerateResult res;
  int steps = 0;
};

Outcome run_both(const SamplerOptions& opt, int canvas, int64_t vocab, uint64_t stats_seed) {
  std::vector<StepInfo> host_info;
  std::vector<std::vector<int32_t>> host_canvas_out;
  GenerateEvents ev;
  ev.on_step = [&](const StepInfo& si, const StepView& v) {
    host_info.push_back(si);
    host_canvas_out.emplace_back(v.canvas_out.begin(), v.canvas_out.end());
  };
  const std::vector<int32_t> prompt = {5, 6};
  Generation host(canvas, vocab, prompt, opt, &ev);
  Generation dev(canvas, vocab, prompt, opt);
  dev.set_device_decisions(true);
  Twin twin;
  StatsSource src{std::mt19937_64(stats_seed), {}};
  std::vector<int32_t> drawn;
  int steps = 0, attempt_step = 0;
  while (!host.done()) {
    EXPECT_EQ(dev.phase(), host.phase());
    if (host.phase() == Generation::Phase::kEncode) {
      const auto ids = host.pending_encode();
      const auto ids_dev = dev.pending_encode();
      EXPECT_TRUE(std::equal(ids.begin(), ids.end(), ids_dev.begin(), ids_dev.end()));
      host.encoded(ids.size());
      dev.encoded(ids_dev.size());
      continue;
    }
    StepRequest rh, rd;
    EXPECT_TRUE(host.begin_step(rh));
    EXPECT_TRUE(dev.begin_step(rd));
    EXPECT_EQ(rh.temperature, rd.temperature);
    EXPECT_EQ(rh.kind, rd.kind);
    const int rows = host.rows();
    if (rd.fresh) {
      twin.p = dev.decide_params();
      EXPECT_EQ(twin.p.rows, rows);
      twin.history.assign(static_cast<size_t>(twin.p.history) * static_cast<size_t>(rows), 7);
      twin.prev_accept.assign(static_cast<size_t>(rows), 1);
      twin.canvas.assign(rd.canvas.begin(), rd.canvas.end());
      decide_start_cpu(twin.p, rd.lcg, twin.buffers(dev.decide_jumps()));
    }
    EXPECT_TRUE(std::equal(rh.canvas.begin(), rh.canvas.end(), twin.canvas.begin(), twin.canvas.end()))
        << "canvas before step " << steps;
    if (!rh.u.empty()) {
      std::vector<double> u(static_cast<size_t>(rows));
      decide_uniforms_cpu(twin.p, twin.buffers(dev.decide_jumps()), u.data());
      EXPECT_TRUE(std::equal(u.begin(), u.end(), rh.u.begin(), rh.u.end())) << "uniforms at step " << steps;
    }
    attempt_step = rd.fresh ? 0 : attempt_step + 1;
    const std::vector<RowStats> stats = src.next(rows, attempt_step, vocab);
    drawn.resize(static_cast<size_t>(rows));
    for (int32_t& d : drawn) d = static_cast<int32_t>(src.gen() % static_cast<uint64_t>(vocab));
    host.end_step(stats.data(), drawn.data());
    DecideStatus st;
    decide_cpu(twin.p, twin.buffers(dev.decide_jumps()), stats.data(), drawn.data(), twin.canvas.data(), &st);
    const StepInfo& si = host_info.back();
    EXPECT_EQ(st.accepted, si.accepted) << "step " << steps;
    EXPECT_EQ(st.stop, static_cast<int32_t>(si.stop)) << "step " << steps;
    EXPECT_EQ(st.mean_entropy, si.mean_entropy) << "step " << steps;
    EXPECT_EQ(st.step, si.step);
    EXPECT_EQ(twin.canvas, host_canvas_out.back()) << "canvas after step " << steps;
    dev.end_step_decided(st, [&](RowStats* out) { std::copy(stats.begin(), stats.end(), out); });
    ++steps;
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_TRUE(dev.done());
  const GenerateResult& a = host.result();
  const GenerateResult& b = dev.result();
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.committed, b.committed);
  EXPECT_EQ(a.forwards, b.forwards);
  EXPECT_EQ(a.finish, b.finish);
  EXPECT_EQ(a.blocks.size(), b.blocks.size());
  for (size_t i = 0; i < std::min(a.blocks.size(), b.blocks.size()); ++i) {
    const BlockInfo &x = a.blocks[i], &y = b.blocks[i];
    EXPECT_TRUE(x.block == y.block && x.canvas == y.canvas && x.steps == y.steps && x.forwards == y.forwards &&
                x.stop == y.stop && x.rerolls == y.rerolls && x.kept == y.kept && x.trimmed == y.trimmed &&
                x.pad_gated == y.pad_gated)
        << "block " << i;
  }
  return Outcome{host.take_result(), steps};
}

SamplerOptions options(SamplerProfile profile, uint64_t seed) {
  SamplerOptions o = make_sampler_options(profile, GenerationConfig{}, 0, 2);  // the profile's switches
  o.seed = seed;
  o.stop_ids = {1};
  o.max_new_tokens = 96;
  o.steps = 16;
  o.plateau_steps = profile == SamplerProfile::kContract ? 3 : 0;
  o.entropy_stop_min_steps = 8;
  return o;
}

TEST(DecideTwin, MatchesHostDecisionsContract) {
  int stops[4] = {}, rerolls = 0, gated = 0;
  for (uint64_t seed : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u, 9u, 10u}) {
    SamplerOptions o = options(SamplerProfile::kContract, seed);
    o.stability_threshold = static_cast<int>(seed % 3);  // 0: always stable; 2: a two-slot ring
    const Outcome out = run_both(o, seed % 2 ? 16 : 37, 50, seed * 11);
    if (HasFailure()) return;
    for (const BlockInfo& b : out.res.blocks) {
      ++stops[static_cast<int>(b.stop)];
      rerolls += b.rerolls;
      gated += b.pad_gated;
    }
  }
  // The random statistics must exercise what they are meant to.
  EXPECT_GT(stops[1], 0) << "confident";
  EXPECT_GT(stops[2], 0) << "plateau";
  EXPECT_GT(stops[3], 0) << "entropy";
  EXPECT_GT(stops[0], 0) << "step budget";
  EXPECT_GT(rerolls, 0);
  EXPECT_GT(gated, 0);
}

TEST(DecideTwin, MatchesHostDecisionsReference) {
  int stops = 0;
  for (uint64_t seed : {11u, 12u, 13u, 14u}) {
    SamplerOptions o = options(SamplerProfile::kReference, seed);
    o.confidence_threshold = 0.01;
    const Outcome out = run_both(o, 16, 50, seed);
    if (HasFailure()) return;
    for (const BlockInfo& b : out.res.blocks) stops += b.stop != StopRule::kNone;
  }
  EXPECT_GT(stops, 0);
}

TEST(DecideTwin, JumpTableMatchesSequentialDraws) {
  Lcg seq(77);
  const std::vector<LcgJump> j = Lcg::jumps(100);
  const uint64_t s0 = seq.state();
  for (int k = 1; k <= 100; ++k) {
    seq.next_u32();
    EXPECT_EQ(j[static_cast<size_t>(k - 1)].mul * s0 + j[static_cast<size_t>(k - 1)].add, seq.state()) << k;
  }
}

}  // namespace decide_test
}  // namespace dg
