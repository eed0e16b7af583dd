#include "diffusion/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace dg {

float schedule_temperature(int cur, int n, double t_min, double t_max) {
  const float frac = static_cast<float>(cur) / static_cast<float>(n);
  const float scaled = static_cast<float>(t_max - t_min) * frac;
  return scaled + static_cast<float>(t_min);
}

std::vector<uint8_t> entropy_bound_accept(std::span<const float> entropy, double bound) {
  const size_t n = entropy.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return entropy[a] < entropy[b]; });
  std::vector<uint8_t> accept(n, 0);
  float cum = 0.0f;
  const float fb = static_cast<float>(bound);
  for (size_t k = 0; k < n; ++k) {
    const float h = entropy[order[k]];
    cum += h;
    if (cum - h <= fb) accept[order[k]] = 1;
  }
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

StopState::StopState(const SamplerOptions& opt, int canvas) : opt_(opt) {
  history_.assign(static_cast<size_t>(std::max(0, opt.stability_threshold)),
                  std::vector<int32_t>(static_cast<size_t>(canvas), -1));
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
  if (!prev_accept_.empty() && std::equal(prev_accept_.begin(), prev_accept_.end(), accept.begin(), accept.end())) {
    ++plateau_run_;
  } else {
    plateau_run_ = 1;
  }
  prev_accept_.assign(accept.begin(), accept.end());

  if (opt_.profile == SamplerProfile::kContract && opt_.pad_gate && opt_.pad_id >= 0 &&
      std::all_of(argmax.begin(), argmax.end(), [&](int32_t t) { return t == opt_.pad_id; })) {
    ++pad_gated_;
    return StopRule::kNone;  // an all-pad canvas is a degenerate forward, never a converged answer
  }
  if (stable && mean_entropy < opt_.confidence_threshold) return StopRule::kConfident;
  if (opt_.profile != SamplerProfile::kContract) return StopRule::kNone;
  if (opt_.plateau_steps > 0 && plateau_run_ >= opt_.plateau_steps && mean_entropy < opt_.plateau_mean_entropy)
    return StopRule::kPlateau;
  if (opt_.entropy_stop > 0.0 && step_index >= opt_.entropy_stop_min_steps && mean_entropy < opt_.entropy_stop)
    return StopRule::kEntropy;
  return StopRule::kNone;
}

}  // namespace dg
