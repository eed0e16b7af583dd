#include "diffusion/generate.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "diffusion/stepper.h"
#include "ops/row_stats/row_stats.h"

namespace dg {
namespace {

bool contains(std::span<const int32_t> ids, int32_t t) { return std::find(ids.begin(), ids.end(), t) != ids.end(); }

}  // namespace

const char* finish_name(FinishReason f) {
  switch (f) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
  }
  return "length";
}

void ModelDenoiser::forward_ids(const KvCache& kv, const Tensor& ids, ScKind kind, float sparse_cutoff) {
  Backend& be = m_.backend();
  const int64_t rows = ids.numel(), V = m_.config().vocab;
  if (kind == ScKind::kLogits)
    DG_CHECK(!tempered_.empty() && tempered_.shape[0] == rows, "self-conditioning needs the previous step's logits");
  if (logits_.empty() || logits_.shape[0] != rows) logits_ = be.alloc_f32(Shape{rows, V});
  if (tempered_.empty() || tempered_.shape[0] != rows) tempered_ = be.alloc_tempered(Shape{rows, V});
  if (row_scale_.empty() || row_scale_.numel() != rows) row_scale_ = be.alloc_f32(Shape{rows});
  const ScInput sc{kind, kind == ScKind::kLogits ? &tempered_ : nullptr, sparse_cutoff};
  // A deferred encode rides in this step's forward; a graphed step (never an attempt's first) takes none.
  if (deferred_kv_ != nullptr && (graphed(kind) || deferred_kv_ != &kv)) flush_encode();
  // The lm_head may leave its softcap to the statistics (Backend::lm_head_open): what it left open is the capture's
  // for a graphed step (its replays leave the same), the step's own otherwise.
  if (graphed(kind)) {
    graph_.run(be, graph_key(kv, ids, sparse_cutoff), [&] { graph_open_ = forward_open(kv, ids, sc); });
    step_open_ = graph_open_;
    return;
  }
  if (deferred_kv_ != nullptr) {
    KvCache* target = std::exchange(deferred_kv_, nullptr);
    m_.commit_denoise_ids(*target, deferred_, ids, sc, logits_);
    step_open_ = OpenLogits{};
    ++fused_encodes_;
  } else {
    step_open_ = forward_open(kv, ids, sc);
  }
  if (m_.early_capture() && graphed(ScKind::kLogits)) {  // the block's next steps, captured while this one runs
    const ScInput next{ScKind::kLogits, &tempered_, sparse_cutoff};
    graph_.prepare(be, graph_key(kv, ids, sparse_cutoff), [&] { graph_open_ = forward_open(kv, ids, next); });
  }
}

OpenLogits ModelDenoiser::forward_open(const KvCache& kv, const Tensor& ids, const ScInput& sc) {
  if (m_.backend().open_single_logits()) return m_.denoise_ids_open(kv, ids, sc, logits_, row_scale_);
  m_.denoise_ids(kv, ids, sc, logits_);
  return {};
}

bool ModelDenoiser::graphed(ScKind kind) const {
  return graphs_ && kind == ScKind::kLogits && m_.backend().can_capture();
}

StepGraphKey ModelDenoiser::graph_key(const KvCache& kv, const Tensor& ids, float sparse_cutoff) const {
  return StepGraphKey{&kv, ids.data, tempered_.data, logits_.data, kv.len(), ids.numel(), sparse_cutoff};
}

void ModelDenoiser::denoise(const KvCache& kv, std::span<const int32_t> canvas, ScKind kind, float sparse_cutoff,
                            float temperature, RowStats* stats) {
  Backend& be = m_.backend();
  DG_CHECK(!canvas.empty(), "denoise: empty canvas");
  m_.check_ids(canvas, "canvas");
  if (ids_.empty() || ids_.numel() != static_cast<int64_t>(canvas.size())) {
    ids_ = be.ids(canvas);
  } else {
    be.ids_into(canvas, ids_);
  }
  forward_ids(kv, ids_, kind, sparse_cutoff);
  be.stage("sampler");
  be.row_stats_open(logits_, step_open_, 0, temperature, tempered_, stats, true);  // draw() may read them
  logits_open_ = false;
  be.stage("host");
  temperature_ = temperature;
}

bool ModelDenoiser::can_decide() {
  if (!decider_made_) {
    decider_ = m_.backend().make_decider();
    decider_made_ = true;
  }
  return decider_ != nullptr;
}

void ModelDenoiser::decide_start(const DecideParams& p, std::span<const int32_t> canvas, uint64_t lcg,
                                 std::span<const LcgJump> jump) {
  DG_CHECK(can_decide(), "the {} backend keeps no sampler decisions", m_.backend().name());
  m_.check_ids(canvas, "canvas");
  decider_->start(p, canvas, lcg, jump);
  decide_draws_ = p.categorical;
}

DecideStatus ModelDenoiser::denoise_decide(const KvCache& kv, ScKind kind, float sparse_cutoff, float temperature) {
  DG_CHECK(decider_ != nullptr, "denoise_decide before decide_start");
  Backend& be = m_.backend();
  forward_ids(kv, decider_->ids(), kind, sparse_cutoff);
  be.stage("sampler");
  const DecideStatus st = decider_->step_open(logits_, step_open_, temperature, tempered_);
  logits_open_ = step_open_.open && !decide_draws_;  // the step stored them back finished for its draws
  be.stage("host");
  temperature_ = temperature;
  return st;
}

void ModelDenoiser::decided_stats(RowStats* out) {
  DG_CHECK(decider_ != nullptr, "decided_stats before decide_start");
  decider_->read_stats(out);
}

void ModelDenoiser::draw(std::span<const double> u, int32_t* out) {
  DG_CHECK(!logits_.empty() && static_cast<int64_t>(u.size()) == logits_.shape[0], "draw before denoise");
  finish_logits();
  m_.backend().categorical(logits_, temperature_, u, out);
}

void Denoiser::encode_reporting(KvCache& kv, std::span<const int32_t> ids, const PrefillProgress& progress) {
  const auto n = static_cast<int64_t>(ids.size());
  if (progress) progress(0, n);
  encode(kv, ids);
  if (progress) progress(n, n);
}

void ModelDenoiser::defer_encode(KvCache& kv, std::span<const int32_t> ids) {
  flush_encode();
  if (ids.empty()) return;
  deferred_.assign(ids.begin(), ids.end());
  deferred_kv_ = &kv;
}

void ModelDenoiser::flush_encode() {
  if (deferred_kv_ == nullptr) return;
  KvCache* target = std::exchange(deferred_kv_, nullptr);
  m_.encode(*target, deferred_);
}

void Denoiser::defer_encode(KvCache& kv, std::span<const int32_t> ids) { encode(kv, ids); }

void ModelDenoiser::finish_logits() {
  if (!logits_open_) return;
  m_.backend().finish_logits(logits_, step_open_, 0);
  logits_open_ = false;
}

void Denoiser::denoise_draw(const KvCache& kv, std::span<const int32_t> canvas, ScKind kind, float sparse_cutoff,
                            float temperature, RowStats* stats, std::span<const double> u, int32_t* drawn) {
  denoise(kv, canvas, kind, sparse_cutoff, temperature, stats);
  draw(u, drawn);
}

void Denoiser::row_logits(int, std::vector<float>&) {
  fail("this denoiser keeps no logits rows, which JSON mode needs");
}

void Denoiser::decide_start(const DecideParams&, std::span<const int32_t>, uint64_t, std::span<const LcgJump>) {
  fail("this denoiser keeps no sampler decisions");
}
DecideStatus Denoiser::denoise_decide(const KvCache&, ScKind, float, float) {
  fail("this denoiser keeps no sampler decisions");
}
void Denoiser::decided_stats(RowStats*) { fail("this denoiser keeps no sampler decisions"); }

void ModelDenoiser::row_logits(int row, std::vector<float>& out) {
  DG_CHECK(!logits_.empty() && row >= 0 && row < logits_.shape[0], "logits row {} before a denoise step of that size",
           row);
  out.resize(static_cast<size_t>(logits_.shape[1]));
  finish_logits();
  m_.backend().copy_to_host(row_slice(logits_, row, 1), out.data());
}

SamplerOptions within_positions(const SamplerOptions& opt, int64_t context, int canvas, int64_t max_positions) {
  if (max_positions <= 0) return opt;
  // A block's canvas starts at the context plus the answer so far, which stays below max_new_tokens while the
  // loop goes on: the last canvas ends by context + max_new_tokens - 1 + canvas.
  const int64_t room = max_positions - context - canvas + 1;
  DG_CHECK(room >= 1,
           "the prompt is {} tokens long, too long for this model: it takes {} positions (max_position_embeddings "
           "in config.json) and the answer needs a {}-token canvas after the prompt; shorten the prompt to at most "
           "{} tokens",
           context, max_positions, canvas, max_positions - canvas);
  SamplerOptions o = opt;
  o.max_new_tokens = static_cast<int>(std::min<int64_t>(o.max_new_tokens, room));
  return o;
}

GenerateResult generate(const Model& model, KvCache& kv, std::span<const int32_t> prompt, const SamplerOptions& opt,
                        const GenerateEvents* events) {
  ModelDenoiser d(model);
  return generate(d, kv, prompt, opt, events);
}

int confidence_trim(std::span<const int32_t> argmax, std::span<const float> p_max, const SamplerOptions& opt) {
  const int n = static_cast<int>(argmax.size());
  if (opt.commit_trim_tau <= 0.0) return n;
  int end = n;
  for (int i = 0; i < n; ++i)
    if (contains(opt.stop_ids, argmax[static_cast<size_t>(i)]) || argmax[static_cast<size_t>(i)] == opt.pad_id) {
      end = i;
      break;
    }
  for (int i = std::max(1, opt.commit_trim_floor); i < end; ++i) {
    const int32_t t = argmax[static_cast<size_t>(i)];
    const bool dup = t == argmax[static_cast<size_t>(i - 1)] || (i + 1 < n && t == argmax[static_cast<size_t>(i + 1)]);
    if (dup && p_max[static_cast<size_t>(i)] < static_cast<float>(opt.commit_trim_tau)) return i;
  }
  return n;
}

namespace {

// The block loop of generate(): g's model calls on `model` until it is done.
void drive(Denoiser& model, KvCache& kv, Generation& g, const GenerateEvents* events, bool on_device,
           bool prompt_next) {
  std::vector<RowStats> stats;
  std::vector<int32_t> drawn;
  while (!g.done()) {
    if (g.phase() == Generation::Phase::kEncode) {
      const std::span<const int32_t> ids = g.pending_encode();
      if (prompt_next && events != nullptr && events->on_prefill)
        model.encode_reporting(kv, ids, events->on_prefill);
      else if (!prompt_next && model.can_defer_encode())
        model.defer_encode(kv, ids);  // a committed block: encoded in the next step's forward
      else
        model.encode(kv, ids);
      prompt_next = false;
      g.encoded(ids.size());
      if (events != nullptr && events->on_encoded) events->on_encoded(ids.size());
      continue;
    }
    StepRequest req;
    if (!g.begin_step(req)) break;
    if (on_device) {
      if (req.fresh) model.decide_start(g.decide_params(), req.canvas, req.lcg, g.decide_jumps());
      const DecideStatus st = model.denoise_decide(kv, req.kind, req.sparse_cutoff, req.temperature);
      g.end_step_decided(st, [&model](RowStats* out) { model.decided_stats(out); });
      continue;
    }
    stats.resize(req.canvas.size());
    if (req.u.empty()) {
      model.denoise(kv, req.canvas, req.kind, req.sparse_cutoff, req.temperature, stats.data());
    } else {
      drawn.resize(req.u.size());
      model.denoise_draw(kv, req.canvas, req.kind, req.sparse_cutoff, req.temperature, stats.data(), req.u,
                         drawn.data());
    }
    g.end_step(stats.data(), drawn.data());
  }
}

}  // namespace

GenerateResult generate(Denoiser& model, KvCache& kv, std::span<const int32_t> prompt, const SamplerOptions& opt,
                        const GenerateEvents* events) {
  opt.validate();
  DG_CHECK(!prompt.empty() || kv.len() > 0, "generate: empty prompt and empty cache");
  const SamplerOptions bounded = within_positions(opt, kv.len() + static_cast<int64_t>(prompt.size()),
                                                  model.canvas(), model.max_positions());
  Generation g(model.canvas(), model.vocab(), prompt, bounded, events);
  // Device decisions unless a step observer needs each step's rows on the host (both paths give the same tokens).
  const bool rows_observed = events != nullptr && events->on_step && events->step_rows;
  const bool on_device = !opt.host_decisions && !rows_observed && model.can_decide();
  g.set_device_decisions(on_device);
  if (g.constrained()) g.set_row_logits([&model](int row, std::vector<float>& out) { model.row_logits(row, out); });
  const int fused_before = model.fused_encodes();
  try {
    drive(model, kv, g, events, on_device, !prompt.empty());  // the first encode is the prompt's when there is one
  } catch (...) {
    model.drop_encode();  // the caller decides what the cache holds after a failure; a deferred block is not in it
    throw;
  }
  model.flush_encode();  // a block deferred but no step after it (a cancelled generation): the cache holds it
  GenerateResult res = g.take_result();
  res.fused_commits = model.fused_encodes() - fused_before;
  return res;
}

}  // namespace dg
