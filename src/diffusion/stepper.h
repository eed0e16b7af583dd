// One request's generation as a resumable state machine: the block loop of generate() cut at every model call, so
// a driver can run the model calls of many requests together (src/diffusion/batch.h) while each request keeps its
// own canvas, RNG, stop state, step and block index, and its stop / re-roll / trim / commit decisions. The model
// calls it asks for are: encode these ids (the prompt, then each committed block but the last), and denoise this
// canvas (ids, self-conditioning kind, temperature, uniforms for categorical draws). Its decisions read only the
// per-row statistics of a step; in device-decisions mode the driver runs them on the backend (the decide op,
// src/ops/decide/decide.h) and the Generation keeps the bookkeeping, its RNG advanced past the same draws.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "diffusion/call_commit.h"
#include "diffusion/generate.h"
#include "diffusion/json_commit.h"

namespace dg {

// What one denoise step of a generation asks of the model (valid until end_step).
struct StepRequest {
  std::span<const int32_t> canvas;
  ScKind kind = ScKind::kZero;
  float temperature = 1.0f;
  float sparse_cutoff = 0.0f;
  std::span<const double> u;  // one uniform per row for categorical draws; empty under argmax commit
  // Device decisions: fresh on an attempt's first step, when canvas is its initial canvas and lcg the RNG state
  // after the canvas draws (the decider starts there); later steps' canvas lives on the backend (canvas empty).
  bool fresh = false;
  uint64_t lcg = 0;
};

class Generation {
 public:
  enum class Phase : uint8_t { kEncode, kDenoise, kDone };

  // Validates opt. The first phase is kEncode with the prompt pending (possibly empty).
  Generation(int canvas, int64_t vocab, std::span<const int32_t> prompt, const SamplerOptions& opt,
             const GenerateEvents* events = nullptr);
  Generation(const Generation&) = delete;  // the stop state refers to the options held here
  Generation& operator=(const Generation&) = delete;

  Phase phase() const { return phase_; }
  bool done() const { return phase_ == Phase::kDone; }
  bool started() const { return block_ >= 0; }  // past the prompt: pending ids are a committed block

  // kEncode: the ids the cache still needs, in order; encoded(n) says the first n of them are in the cache.
  std::span<const int32_t> pending_encode() const;
  void encoded(size_t n);

  // kDenoise: asks events->cancel first; a cancelled generation ends (kDone, finish kCancelled) and this returns
  // false. Otherwise fills `req` with the step's inputs.
  bool begin_step(StepRequest& req);
  // The step's per-row statistics of softmax(logits / T) and, when req.u was not empty, the categorical draws.
  void end_step(const RowStats* stats, const int32_t* drawn);

  // Before the first step: the decide op runs the step decisions (end_step_decided instead of end_step).
  void set_device_decisions(bool on);
  DecideParams decide_params() const;                   // the attempt's rules for the decide op
  std::span<const LcgJump> decide_jumps() const { return jumps_; }  // Lcg::jumps(2 * canvas)
  // The decide op's status of the step (on_step gets its StepInfo and an empty view); when the attempt ends, `read`
  // fills the last step's row statistics [rows].
  void end_step_decided(const DecideStatus& st, const std::function<void(RowStats*)>& read);

  int rows() const { return len_; }  // the canvas length of the current attempt
  // JSON mode or strict tool calls: the driver must set_row_logits.
  bool constrained() const { return json_.has_value() || calls_.has_value(); }
  // How to read a row's logits of the last denoise step (asked only for rows a constraint replaces).
  void set_row_logits(RowLogits fn) { row_logits_ = std::move(fn); }
  const GenerateResult& result() const { return res_; }
  GenerateResult take_result() { return std::move(res_); }

 private:
  void next_block();
  void start_attempt();
  void step_ended();  // a step's end into info_.step_ends
  void attempt_done(const RowStats* stats);
  void finish();

  const int C_;
  const int64_t V_;
  const SamplerOptions opt_;
  const GenerateEvents* events_;
  Lcg rng_;
  Phase phase_ = Phase::kEncode;
  std::vector<int32_t> pending_;
  size_t pending_at_ = 0;
  // JSON mode with a schema and the object still open, or a strict tool call open: the block count does not end the
  // generation (every block commits a token; the token budget, which the closing walk keeps, does).
  bool constraint_open() const {
    return (json_.has_value() && json_->has_schema() && !json_->grammar().complete()) ||
           (calls_.has_value() && calls_->open());
  }
  int max_blocks_ = 0;
  int block_ = -1;
  BlockInfo info_;
  std::chrono::steady_clock::time_point attempt_t0_;  // BlockInfo::step_ends counts from here
  GenerateResult res_;
  // The attempt in progress: canvas and the last step's per-row results.
  int len_ = 0, step_ = 0;
  float temperature_ = 1.0f;
  StopRule stop_ = StopRule::kNone;
  int pad_gated_ = 0;
  bool device_ = false;
  std::vector<LcgJump> jumps_;
  ScKind sc_kind_ = ScKind::kZero;
  std::optional<StopState> stopper_;
  std::vector<int32_t> canvas_, argmax_, denoised_;
  std::vector<float> entropy_;
  std::vector<double> u_;
  std::optional<JsonCommit> json_;
  std::optional<CallCommit> calls_;
  RowLogits row_logits_;
};

}  // namespace dg
