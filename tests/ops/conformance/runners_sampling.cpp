// Runners of the sampler's ops: row statistics (with ties for the maximum placed across each row), categorical
// draws, and the decide op through the backend's Decider over several steps.

#include "core/error.h"
#include "diffusion/rng.h"
#include "ops/conformance/runner.h"
#include "support/seeded.h"

namespace dg::test {
namespace {

// f32 logits [rows, vocab] in [-12, 12]; with ties, every row has two or three entries at the maximum 30.
std::vector<float> logits(const OpCase& c, int64_t rows, int64_t vocab, bool ties) {
  std::vector<float> v = case_values(c, 1, rows * vocab, -12, 12, Storage::kF32);
  if (!ties) return v;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = v.data() + r * vocab;
    const int64_t a = (r * 7919) % vocab, b = vocab - 1 - (r * 104729) % vocab;
    row[a] = row[b] = 30.0f;
    if (r % 3 == 0) row[vocab / 2] = 30.0f;
  }
  return v;
}

}  // namespace

std::vector<Output> run_row_stats(const OpCase& c, const Side& s) {
  const int64_t rows = c.p.n("rows"), vocab = c.p.n("vocab");
  const Tensor x = activation(s, Shape{rows, vocab}, logits(c, rows, vocab, true), true);
  Tensor tempered = s.be.alloc(Shape{rows, vocab});
  std::vector<RowStats> st(static_cast<size_t>(rows));
  s.be.row_stats(x, static_cast<float>(c.p.f("temperature")), tempered, st.data());
  Output argmax{"argmax", {}, {}, {}}, entropy{"entropy", {}, {}, {}}, p_max{"p_max", {}, {}, {}};
  for (const RowStats& r : st) {
    argmax.ints.push_back(r.argmax);
    entropy.values.push_back(r.entropy);
    p_max.values.push_back(r.p_max);
  }
  return {argmax, entropy, p_max, Output{"tempered", to_host(s, tempered), {}, {}}};
}

std::vector<Output> run_categorical(const OpCase& c, const Side& s) {
  const int64_t rows = c.p.n("rows"), vocab = c.p.n("vocab");
  const Tensor x = activation(s, Shape{rows, vocab}, logits(c, rows, vocab, false), true);
  std::vector<double> u(static_cast<size_t>(rows));
  for (size_t r = 0; r < u.size(); ++r) u[r] = seeded_unit(case_seed(c, 2), r);
  std::vector<int32_t> ids(u.size());
  s.be.categorical(x, static_cast<float>(c.p.f("temperature")), u, ids.data());
  return {Output{"ids", {}, std::vector<int64_t>(ids.begin(), ids.end()), {}}};
}

// rows, vocab, categorical, steps: every even row near-certain (one id far above the rest), so rows are accepted and
// the stop rules can fire; the statuses, canvases and statistics of every step, bit for bit.
std::vector<Output> run_decide(const OpCase& c, const Side& s) {
  const int64_t rows = c.p.n("rows"), vocab = c.p.n("vocab");
  const auto n = static_cast<int32_t>(rows);
  DecideParams p;
  p.rows = n;
  p.vocab = vocab;
  p.history = 2;
  p.categorical = c.p.n("categorical") != 0;
  p.contract = !p.categorical;
  p.pad_gate_id = p.contract ? 0 : -1;
  p.confidence = 0.02;
  p.plateau_steps = 2;
  p.entropy_stop_min_steps = 3;
  std::unique_ptr<Decider> d = s.be.make_decider();
  DG_CHECK(d != nullptr, "the {} backend has no decider", s.be.name());
  const std::vector<int32_t> canvas =
      seeded_ids(static_cast<size_t>(rows), case_seed(c, 1), 3, static_cast<int32_t>(vocab));
  d->start(p, canvas, case_seed(c, 2), Lcg::jumps(2 * n));
  // The decisions compare exactly; the statistics behind them (f32 entropies and maxima from the backend's row
  // statistics, whose bound is row_stats') under their own bound.
  Output out{"decisions", {}, {}, {}}, stats{"statistics", {}, {}, {}};
  std::vector<RowStats> st(static_cast<size_t>(rows));
  std::vector<int32_t> ids(static_cast<size_t>(rows));
  for (int64_t step = 0; step < c.p.n("steps"); ++step) {
    std::vector<float> x = case_values(c, 10 + static_cast<uint64_t>(step), rows * vocab, -2, 2, Storage::kF32);
    for (int64_t r = 0; r < rows; r += 2) x[static_cast<size_t>(r * vocab + (r * 31 + step) % vocab)] = 30.0f;
    const Tensor logits_t = activation(s, Shape{rows, vocab}, x, true);
    Tensor tempered = s.be.alloc(Shape{rows, vocab});
    const DecideStatus status = d->step(logits_t, 0.8f, tempered);
    for (int sh = 0; sh < 64; sh += 16) out.ints.push_back(static_cast<int64_t>((status.lcg >> sh) & 0xffff));
    out.ints.insert(out.ints.end(), {status.stop, status.accepted, status.step, status.pad_gated});
    stats.values.push_back(status.mean_entropy);
    d->read_stats(st.data());
    d->read_canvas(ids.data());
    for (int64_t r = 0; r < rows; ++r) {
      const RowStats& t = st[static_cast<size_t>(r)];
      out.ints.insert(out.ints.end(), {ids[static_cast<size_t>(r)], t.argmax});
      stats.values.insert(stats.values.end(), {t.entropy, t.p_max});
    }
  }
  return {out, stats};
}

}  // namespace dg::test
