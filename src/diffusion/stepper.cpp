#include "diffusion/stepper.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace dg {
namespace {

bool holds_id(std::span<const int32_t> ids, int32_t t) { return std::find(ids.begin(), ids.end(), t) != ids.end(); }

// A NaN or infinite logit makes its row's entropy NaN, and with it the step's mean: the tokens of such a step are
// garbage, so the generation ends with an error instead of committing them.
void check_finite_step(float mean_entropy, int block, int step) {
  if (std::isfinite(mean_entropy)) return;
  fail("the model's logits are not finite (NaN or infinity) at block {}, denoising step {}: a weight holds a "
       "non-finite value or an activation overflowed (check the weights with --check-tensors or `diffgemma verify`)",
       block + 1, step);
}

// The decide op reports StopRule's values.
static_assert(static_cast<int>(StopRule::kNone) == 0 && static_cast<int>(StopRule::kConfident) == 1 &&
              static_cast<int>(StopRule::kPlateau) == 2 && static_cast<int>(StopRule::kEntropy) == 3);

}  // namespace

Generation::Generation(int canvas, int64_t vocab, std::span<const int32_t> prompt, const SamplerOptions& opt,
                       const GenerateEvents* events)
    : C_(canvas), V_(vocab), opt_(opt), events_(events), rng_(opt.seed), pending_(prompt.begin(), prompt.end()) {
  opt_.validate();
  DG_CHECK(C_ > 0 && V_ > 0, "generation: canvas {} and vocabulary {} must be positive", C_, V_);
  max_blocks_ = (opt_.max_new_tokens + C_ - 1) / C_;
  if (opt_.commit_trim_tau > 0.0) max_blocks_ *= 2;  // trimmed blocks commit fewer tokens: keep the token budget binding
  if (opt_.json) json_.emplace(opt_.json, opt_.json_schema);
  if (opt_.tool_calls) calls_.emplace(opt_.tool_calls);
}

std::span<const int32_t> Generation::pending_encode() const {
  DG_CHECK(phase_ == Phase::kEncode, "generation: no ids to encode outside the encode phase");
  return std::span<const int32_t>(pending_).subspan(pending_at_);
}

void Generation::encoded(size_t n) {
  DG_CHECK(phase_ == Phase::kEncode && n <= pending_.size() - pending_at_,
           "generation: {} ids encoded of {} pending", n, pending_.size() - pending_at_);
  pending_at_ += n;
  if (pending_at_ < pending_.size()) return;
  pending_.clear();
  pending_at_ = 0;
  next_block();
}

void Generation::next_block() {
  ++block_;
  if (block_ >= max_blocks_ && !constraint_open()) {
    finish();
    return;
  }
  info_ = BlockInfo{};
  info_.block = block_;
  len_ = C_;
  start_attempt();
}

void Generation::start_attempt() {
  const auto n = static_cast<size_t>(len_);
  canvas_.resize(n);
  for (int32_t& t : canvas_) t = rng_.randint(V_);
  argmax_.assign(n, 0);
  denoised_.assign(n, 0);
  entropy_.assign(n, 0.0f);
  u_.assign(opt_.argmax_commit ? 0 : n, 0.0);
  sc_kind_ = opt_.first_step_self_embed ? ScKind::kSelfEmbed : ScKind::kZero;
  stopper_.emplace(opt_, len_);
  step_ = 0;
  stop_ = StopRule::kNone;
  pad_gated_ = 0;
  phase_ = Phase::kDenoise;
  info_.step_ends.clear();
  attempt_t0_ = std::chrono::steady_clock::now();
}

void Generation::step_ended() {
  info_.step_ends.push_back(
      std::chrono::duration<float>(std::chrono::steady_clock::now() - attempt_t0_).count());
}

bool Generation::begin_step(StepRequest& req) {
  DG_CHECK(phase_ == Phase::kDenoise, "generation: a denoise step outside the denoise phase");
  if (events_ != nullptr && events_->cancel && events_->cancel()) {
    info_.forwards += step_;
    res_.forwards += info_.forwards;
    res_.finish = FinishReason::kCancelled;
    finish();
    return false;
  }
  temperature_ = schedule_temperature(opt_.steps - step_, opt_.steps, opt_.t_min, opt_.t_max);
  if (device_) {
    const bool fresh = step_ == 0;
    req = StepRequest{fresh ? std::span<const int32_t>(canvas_) : std::span<const int32_t>{}, sc_kind_, temperature_,
                      static_cast<float>(opt_.sc_sparse_cutoff), {}, fresh, rng_.state()};
    rng_.discard(static_cast<int64_t>(u_.size()));  // the decider draws the uniforms
    return true;
  }
  // The draws' uniforms come before the step's noise in the RNG stream (one per row, in row order).
  for (double& x : u_) x = rng_.uniform();
  req = StepRequest{canvas_, sc_kind_, temperature_, static_cast<float>(opt_.sc_sparse_cutoff), u_};
  return true;
}

void Generation::set_device_decisions(bool on) {
  DG_CHECK(block_ < 0, "generation: device decisions are chosen before the first step");
  DG_CHECK(!on || opt_.stability_threshold >= 0, "generation: a negative stability threshold");
  device_ = on;
  if (on) jumps_ = Lcg::jumps(2 * C_);
}

DecideParams Generation::decide_params() const { return dg::decide_params(opt_, len_, V_); }

void Generation::end_step_decided(const DecideStatus& st, const std::function<void(RowStats*)>& read) {
  DG_CHECK(phase_ == Phase::kDenoise && device_, "generation: end_step_decided outside a device-decided step");
  rng_.discard(len_);  // the renoise ids
  DG_CHECK(st.step == step_ + 1 && st.lcg == rng_.state(),
           "generation: the decide op is at step {} with RNG state {:#x}, the host at step {} with {:#x}", st.step,
           st.lcg, step_ + 1, rng_.state());
  check_finite_step(st.mean_entropy, block_, step_ + 1);
  step_ended();
  stop_ = static_cast<StopRule>(st.stop);
  pad_gated_ = st.pad_gated;
  if (events_ != nullptr && events_->on_step)
    events_->on_step(StepInfo{block_, step_ + 1, temperature_, st.mean_entropy, st.accepted, stop_}, StepView{});
  sc_kind_ = ScKind::kLogits;
  ++step_;
  if (stop_ == StopRule::kNone && step_ < opt_.steps) return;
  std::vector<RowStats> stats(static_cast<size_t>(len_));
  read(stats.data());
  for (int r = 0; r < len_; ++r) argmax_[static_cast<size_t>(r)] = stats[static_cast<size_t>(r)].argmax;
  attempt_done(stats.data());
}

void Generation::end_step(const RowStats* stats, const int32_t* drawn) {
  DG_CHECK(phase_ == Phase::kDenoise, "generation: end_step outside the denoise phase");
  double h_sum = 0.0;
  for (int r = 0; r < len_; ++r) {
    argmax_[static_cast<size_t>(r)] = stats[r].argmax;
    entropy_[static_cast<size_t>(r)] = stats[r].entropy;
    h_sum += stats[r].entropy;
  }
  check_finite_step(static_cast<float>(h_sum / len_), block_, step_ + 1);
  step_ended();
  if (opt_.argmax_commit) {
    denoised_ = argmax_;
  } else {
    DG_CHECK(drawn != nullptr, "generation: a step under categorical draws needs the drawn ids");
    std::copy(drawn, drawn + len_, denoised_.begin());
  }
  const std::vector<uint8_t> accept = entropy_bound_accept(entropy_, opt_.entropy_bound);
  const std::vector<int32_t> canvas_in = canvas_;
  for (int r = 0; r < len_; ++r) {
    const int32_t noise = rng_.randint(V_);  // the reference draws a whole fresh canvas every step
    canvas_[static_cast<size_t>(r)] = accept[static_cast<size_t>(r)] ? denoised_[static_cast<size_t>(r)] : noise;
  }
  const float mean_h = static_cast<float>(h_sum / len_);
  const StopRule rule = stopper_->update(argmax_, accept, mean_h, step_ + 1);
  if (events_ != nullptr && events_->on_step) {
    StepInfo si{block_, step_ + 1, temperature_, mean_h, static_cast<int>(std::count(accept.begin(), accept.end(), 1)),
                rule};
    events_->on_step(si, StepView{canvas_in, argmax_, canvas_, accept, entropy_});
  }
  sc_kind_ = ScKind::kLogits;  // the next step self-conditions on this step's tempered logits
  ++step_;
  stop_ = rule;
  pad_gated_ = stopper_->pad_gated();
  if (rule != StopRule::kNone || step_ == opt_.steps) attempt_done(stats);
}

void Generation::attempt_done(const RowStats* stats) {
  info_.forwards += step_;
  const int32_t first = argmax_[0];
  const bool control = holds_id(opt_.stop_ids, first) || first == opt_.pad_id || first == opt_.bos_id;
  if (block_ == 0 && res_.committed.empty() && control && info_.rerolls < opt_.empty_reply_retries) {
    ++info_.rerolls;
    len_ = std::max(C_ / 4, len_ / 2);  // the seed shrinks 256 -> 128 -> 64 on successive retries
    start_attempt();
    return;
  }
  std::vector<float> p_max(static_cast<size_t>(len_));
  for (int r = 0; r < len_; ++r) p_max[static_cast<size_t>(r)] = stats[r].p_max;
  info_.canvas = len_;
  info_.steps = step_;
  info_.stop = stop_;
  info_.pad_gated = pad_gated_;
  info_.kept = confidence_trim(argmax_, p_max, opt_);
  info_.trimmed = info_.kept < len_;
  if (constrained()) {
    DG_CHECK(row_logits_ != nullptr,
             "generation: JSON mode or a strict tool call without a source of logits rows (set_row_logits)");
    const std::span<int32_t> kept(argmax_.data(), static_cast<size_t>(info_.kept));
    const int budget = opt_.max_new_tokens - static_cast<int>(res_.tokens.size());
    info_.constrained =
        json_ ? json_->constrain(kept, row_logits_, budget) : calls_->constrain(kept, row_logits_, budget);
  }
  res_.forwards += info_.forwards;
  const std::span<const int32_t> block(argmax_.data(), static_cast<size_t>(info_.kept));
  res_.committed.insert(res_.committed.end(), block.begin(), block.end());
  res_.blocks.push_back(info_);
  if (events_ != nullptr && events_->on_block) events_->on_block(info_, block);

  const auto stop_at = std::find_if(block.begin(), block.end(), [&](int32_t t) { return holds_id(opt_.stop_ids, t); });
  res_.tokens.insert(res_.tokens.end(), block.begin(), stop_at);
  if (stop_at != block.end()) {
    res_.finish = FinishReason::kStop;
    res_.stop_token = *stop_at;
    finish();
    return;
  }
  if (json_ && json_->grammar().complete()) {  // the object closed on the block's last row: nothing may follow
    res_.finish = FinishReason::kStop;
    finish();
    return;
  }
  if (static_cast<int>(res_.tokens.size()) >= opt_.max_new_tokens ||
      (block_ + 1 == max_blocks_ && !constraint_open())) {
    finish();
    return;
  }
  pending_.assign(block.begin(), block.end());
  pending_at_ = 0;
  phase_ = Phase::kEncode;
}

void Generation::finish() {
  if (static_cast<int>(res_.tokens.size()) > opt_.max_new_tokens) {
    res_.tokens.resize(static_cast<size_t>(opt_.max_new_tokens));
    res_.finish = FinishReason::kLength;
  }
  phase_ = Phase::kDone;
}

}  // namespace dg
