#include "diffusion/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/decide/decide_rule.h"

namespace dg {

float schedule_temperature(int cur, int n, double t_min, double t_max) {
  const float frac = static_cast<float>(cur) / static_cast<float>(n);
  const float scaled = static_cast<float>(t_max - t_min) * frac;
  return scaled + static_cast<float>(t_min);
}

std::vector<uint8_t> entropy_bound_accept(std::span<const float> entropy, double bound) {
  const size_t n = entropy.size();
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return entropy[static_cast<size_t>(a)] < entropy[static_cast<size_t>(b)];
  });
  std::vector<uint8_t> accept(n, 0);
  decide_accept_sorted(entropy.data(), order.data(), static_cast<int32_t>(n), static_cast<float>(bound),
                       accept.data());
  return accept;
}

const char* stop_rule_name(StopRule r) {
  switch (r) {
    case StopRule::kNone: return "max_steps";
    case StopRule::kConfident: return "confident";
    case StopRule::kPlateau: return "plateau";
    case StopRule::kEntropy: return "entropy";
  }
  return "?";
}

DecideParams decide_params(const SamplerOptions& opt, int32_t rows, int64_t vocab) {
  DecideParams p;
  p.rows = rows;
  p.vocab = vocab;
  p.history = std::max(0, opt.stability_threshold);
  p.categorical = !opt.argmax_commit;
  p.contract = opt.profile == SamplerProfile::kContract;
  p.pad_gate_id = p.contract && opt.pad_gate && opt.pad_id >= 0 ? opt.pad_id : -1;
  p.bound = static_cast<float>(opt.entropy_bound);
  p.confidence = opt.confidence_threshold;
  p.plateau_entropy = opt.plateau_mean_entropy;
  p.entropy_stop = opt.entropy_stop;
  p.plateau_steps = opt.plateau_steps;
  p.entropy_stop_min_steps = opt.entropy_stop_min_steps;
  return p;
}

StopState::StopState(const SamplerOptions& opt, int canvas) : params_(decide_params(opt, canvas, 0)) {
  history_.assign(static_cast<size_t>(params_.history), std::vector<int32_t>(static_cast<size_t>(canvas), -1));
}

StopRule StopState::update(std::span<const int32_t> argmax, std::span<const uint8_t> accept, double mean_entropy,
                           int step_index) {
  bool stable = true;
  for (const auto& h : history_)
    if (!std::equal(h.begin(), h.end(), argmax.begin(), argmax.end())) stable = false;
  if (!history_.empty()) {
    history_[next_].assign(argmax.begin(), argmax.end());
    next_ = (next_ + 1) % history_.size();
  }
  const bool same_accept =
      !prev_accept_.empty() && std::equal(prev_accept_.begin(), prev_accept_.end(), accept.begin(), accept.end());
  prev_accept_.assign(accept.begin(), accept.end());
  const bool all_pad = std::all_of(argmax.begin(), argmax.end(), [&](int32_t t) { return t == params_.pad_gate_id; });
  return static_cast<StopRule>(
      decide_stop_rule(params_, state_, stable, same_accept, all_pad, mean_entropy, step_index));
}

}  // namespace dg
