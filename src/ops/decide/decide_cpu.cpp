// The decide op's CPU twin: the reference for the CUDA kernel, and the device-decisions path of the CPU backend.
#include <algorithm>
#include <numeric>
#include <vector>

#include "ops/decide/decide.h"
#include "ops/decide/decide_rule.h"

namespace dg {

void decide_start_cpu(const DecideParams& p, uint64_t lcg, const DecideBuffers& b) {
  *b.state = DecideState{};
  b.state->lcg = lcg;
  std::fill(b.history, b.history + static_cast<size_t>(p.history) * static_cast<size_t>(p.rows), -1);
  std::fill(b.prev_accept, b.prev_accept + p.rows, uint8_t{0});
}

void decide_uniforms_cpu(const DecideParams& p, const DecideBuffers& b, double* u) {
  for (int32_t r = 0; r < p.rows; ++r) u[r] = lcg_uniform(lcg_draw(b.jump[r], b.state->lcg));
}

void decide_cpu(const DecideParams& p, const DecideBuffers& b, const RowStats* stats, const int32_t* drawn,
                int32_t* canvas, DecideStatus* status) {
  const auto n = static_cast<size_t>(p.rows);
  DecideState& st = *b.state;
  std::vector<float> entropy(n);
  double h_sum = 0.0;
  bool stable = true, all_pad = true;
  for (size_t r = 0; r < n; ++r) {
    entropy[r] = stats[r].entropy;
    h_sum += stats[r].entropy;
    all_pad = all_pad && stats[r].argmax == p.pad_gate_id;
    for (int32_t k = 0; k < p.history; ++k)
      stable = stable && b.history[static_cast<size_t>(k) * n + r] == stats[r].argmax;
  }
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t c) {
    return entropy[static_cast<size_t>(a)] < entropy[static_cast<size_t>(c)];
  });
  std::vector<uint8_t> accept(n);
  decide_accept_sorted(entropy.data(), order.data(), p.rows, p.bound, accept.data());
  const int32_t noise0 = p.categorical ? p.rows : 0;  // the uniforms came first
  int32_t accepted = 0;
  bool same = st.has_prev != 0;
  for (size_t r = 0; r < n; ++r) {
    const int32_t denoised = p.categorical ? drawn[r] : stats[r].argmax;
    const int32_t noise = lcg_randint(lcg_draw(b.jump[static_cast<size_t>(noise0) + r], st.lcg), p.vocab);
    canvas[r] = accept[r] ? denoised : noise;
    accepted += accept[r];
    same = same && b.prev_accept[r] == accept[r];
    b.prev_accept[r] = accept[r];
    if (p.history > 0) b.history[static_cast<size_t>(st.history_next) * n + r] = stats[r].argmax;
  }
  if (p.history > 0) st.history_next = (st.history_next + 1) % p.history;
  st.has_prev = 1;
  const LcgJump& all = b.jump[noise0 + p.rows - 1];  // past every draw of the step
  st.lcg = all.mul * st.lcg + all.add;
  ++st.step;
  const float mean = static_cast<float>(h_sum / p.rows);
  const int32_t rule = decide_stop_rule(p, st, stable, same, all_pad, mean, st.step);
  *status = DecideStatus{st.lcg, rule, accepted, mean, st.step, st.pad_gated, 0};
}

}  // namespace dg
