#include "diffusion/generate.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/row_stats/row_stats.h"

namespace dg {
namespace {

struct BlockRun {
  std::vector<int32_t> argmax;
  std::vector<float> p_max;
  int steps = 0;
  StopRule stop = StopRule::kNone;
  int pad_gated = 0;
  bool cancelled = false;
};

bool contains(std::span<const int32_t> ids, int32_t t) { return std::find(ids.begin(), ids.end(), t) != ids.end(); }

// Denoises one canvas of `len` rows at positions kv.len()...
BlockRun denoise_block(Denoiser& model, const KvCache& kv, int len, int block, Lcg& rng, const SamplerOptions& opt,
                       const GenerateEvents* events) {
  const int64_t V = model.vocab();
  std::vector<int32_t> canvas(static_cast<size_t>(len));
  for (int32_t& t : canvas) t = rng.randint(V);

  std::vector<RowStats> stats(static_cast<size_t>(len));
  std::vector<int32_t> argmax(static_cast<size_t>(len)), denoised(argmax.size());
  std::vector<float> entropy(static_cast<size_t>(len));
  std::vector<double> u(static_cast<size_t>(len));
  ScKind sc_kind = opt.first_step_self_embed ? ScKind::kSelfEmbed : ScKind::kZero;
  StopState stopper(opt, len);
  BlockRun run;
  for (int i = 0; i < opt.steps; ++i) {
    if (events != nullptr && events->cancel && events->cancel()) {
      run.cancelled = true;
      return run;
    }
    const int cur = opt.steps - i;
    const float T = schedule_temperature(cur, opt.steps, opt.t_min, opt.t_max);
    model.denoise(kv, canvas, sc_kind, static_cast<float>(opt.sc_sparse_cutoff), T, stats.data());
    double h_sum = 0.0;
    for (int r = 0; r < len; ++r) {
      argmax[static_cast<size_t>(r)] = stats[static_cast<size_t>(r)].argmax;
      entropy[static_cast<size_t>(r)] = stats[static_cast<size_t>(r)].entropy;
      h_sum += stats[static_cast<size_t>(r)].entropy;
    }
    if (opt.argmax_commit) {
      denoised = argmax;
    } else {
      for (double& x : u) x = rng.uniform();  // one categorical draw per row, in row order
      model.draw(u, denoised.data());
    }
    const std::vector<uint8_t> accept = entropy_bound_accept(entropy, opt.entropy_bound);
    const std::vector<int32_t> canvas_in = canvas;
    for (int r = 0; r < len; ++r) {
      const int32_t noise = rng.randint(V);  // the reference draws a whole fresh canvas every step
      canvas[static_cast<size_t>(r)] = accept[static_cast<size_t>(r)] ? denoised[static_cast<size_t>(r)] : noise;
    }
    const float mean_h = static_cast<float>(h_sum / len);
    const StopRule rule = stopper.update(argmax, accept, mean_h, i + 1);
    if (events != nullptr && events->on_step) {
      StepInfo si{block, i + 1, T, mean_h, static_cast<int>(std::count(accept.begin(), accept.end(), 1)), rule};
      events->on_step(si, StepView{canvas_in, argmax, canvas, accept, entropy});
    }
    sc_kind = ScKind::kLogits;  // the next step self-conditions on this step's tempered logits
    run.steps = i + 1;
    run.stop = rule;
    if (rule != StopRule::kNone) break;
  }
  run.argmax = argmax;
  run.pad_gated = stopper.pad_gated();
  run.p_max.resize(static_cast<size_t>(len));
  for (int r = 0; r < len; ++r) run.p_max[static_cast<size_t>(r)] = stats[static_cast<size_t>(r)].p_max;
  return run;
}

}  // namespace

const char* finish_name(FinishReason f) {
  switch (f) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
  }
  return "length";
}

void ModelDenoiser::denoise(const KvCache& kv, std::span<const int32_t> canvas, ScKind kind, float sparse_cutoff,
                            float temperature, RowStats* stats) {
  Backend& be = m_.backend();
  const int64_t rows = static_cast<int64_t>(canvas.size()), V = m_.config().vocab;
  if (kind == ScKind::kLogits)
    DG_CHECK(!tempered_.empty() && tempered_.shape[0] == rows, "self-conditioning needs the previous step's logits");
  if (logits_.empty() || logits_.shape[0] != rows) logits_ = be.alloc_f32(Shape{rows, V});
  if (tempered_.empty() || tempered_.shape[0] != rows) tempered_ = be.alloc(Shape{rows, V});
  const ScInput sc{kind, kind == ScKind::kLogits ? &tempered_ : nullptr, sparse_cutoff};
  if (graphs_ && kind == ScKind::kLogits && be.can_capture()) {
    m_.check_ids(canvas, "canvas");
    if (ids_.empty() || ids_.numel() != rows) {
      ids_ = be.ids(canvas);
      captured_ = GraphKey{};
    } else {
      be.ids_into(canvas, ids_);
    }
    const GraphKey key{&kv, kv.len(), rows, sparse_cutoff};
    if (!(key == captured_)) {
      be.capture_begin();
      m_.denoise_ids(kv, ids_, sc, logits_);
      be.capture_end();
      captured_ = key;
    }
    be.launch_captured();
  } else {
    m_.denoise(kv, canvas, sc, logits_);
  }
  be.stage("sampler");
  be.row_stats(logits_, temperature, tempered_, stats);
  be.stage("host");
  temperature_ = temperature;
}

void ModelDenoiser::draw(std::span<const double> u, int32_t* out) {
  DG_CHECK(!logits_.empty() && static_cast<int64_t>(u.size()) == logits_.shape[0], "draw before denoise");
  m_.backend().categorical(logits_, temperature_, u, out);
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

GenerateResult generate(Denoiser& model, KvCache& kv, std::span<const int32_t> prompt, const SamplerOptions& opt,
                        const GenerateEvents* events) {
  opt.validate();
  const int C = model.canvas();
  DG_CHECK(!prompt.empty() || kv.len() > 0, "generate: empty prompt and empty cache");
  model.encode(kv, prompt);

  Lcg rng(opt.seed);
  GenerateResult res;
  int max_blocks = (opt.max_new_tokens + C - 1) / C;
  if (opt.commit_trim_tau > 0.0) max_blocks *= 2;  // trimmed blocks commit fewer tokens: keep the token budget binding
  for (int b = 0; b < max_blocks; ++b) {
    BlockInfo info;
    info.block = b;
    int len = C;
    BlockRun run;
    for (;;) {
      run = denoise_block(model, kv, len, b, rng, opt, events);
      info.forwards += run.steps;
      if (run.cancelled) break;
      const int32_t first = run.argmax[0];
      const bool control = contains(opt.stop_ids, first) || first == opt.pad_id || first == opt.bos_id;
      if (b == 0 && res.committed.empty() && control && info.rerolls < opt.empty_reply_retries) {
        ++info.rerolls;
        len = std::max(C / 4, len / 2);  // the seed shrinks 256 -> 128 -> 64 on successive retries
        continue;
      }
      break;
    }
    if (run.cancelled) {
      res.forwards += info.forwards;
      res.finish = FinishReason::kCancelled;
      break;
    }
    info.canvas = len;
    info.steps = run.steps;
    info.stop = run.stop;
    info.pad_gated = run.pad_gated;
    info.kept = confidence_trim(run.argmax, run.p_max, opt);
    info.trimmed = info.kept < len;
    res.forwards += info.forwards;
    const std::span<const int32_t> block(run.argmax.data(), static_cast<size_t>(info.kept));
    res.committed.insert(res.committed.end(), block.begin(), block.end());
    res.blocks.push_back(info);
    if (events != nullptr && events->on_block) events->on_block(info, block);

    const auto stop_at = std::find_if(block.begin(), block.end(), [&](int32_t t) { return contains(opt.stop_ids, t); });
    res.tokens.insert(res.tokens.end(), block.begin(), stop_at);
    if (stop_at != block.end()) {
      res.finish = FinishReason::kStop;
      res.stop_token = *stop_at;
      break;
    }
    if (static_cast<int>(res.tokens.size()) >= opt.max_new_tokens || b + 1 == max_blocks) break;
    model.encode(kv, block);
  }
  if (static_cast<int>(res.tokens.size()) > opt.max_new_tokens) {
    res.tokens.resize(static_cast<size_t>(opt.max_new_tokens));
    res.finish = FinishReason::kLength;
  }
  return res;
}

}  // namespace dg
