#include "cli/bench_serve.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"
#include "diffusion/batch.h"
#include "diffusion/rng.h"
#include "model/synthetic.h"

namespace dg::cli {
namespace {

double serve_clock_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Per-row FLOPs of a layer's projections, dense MLP, router and experts (2 per multiply-add).
double layer_row_flops(const ModelConfig& cfg, const LayerSpec& s) {
  const double H = cfg.hidden, D = s.head_dim;
  const double q = cfg.n_heads * D, kv = s.n_kv_heads * D;
  const double proj = q + kv + (s.sliding ? kv : 0.0) + q;  // q, k, v (sliding layers only), o
  return 2.0 * H * proj + 2.0 * 3.0 * H * cfg.intermediate + 2.0 * H * cfg.n_experts +
         2.0 * 3.0 * H * cfg.expert_ff * cfg.top_k;
}

// Keys one row attends to in layer s: the cache it sees plus `fresh` keys.
double keys_seen(const ModelConfig& cfg, const LayerSpec& s, int64_t ctx, double fresh) {
  const double cached = s.sliding ? std::min<double>(static_cast<double>(ctx), cfg.window - 1) : static_cast<double>(ctx);
  return cached + fresh;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

double denoise_flops_per_row(const ModelConfig& cfg, int64_t ctx, int64_t rows) {
  double f = 0;
  for (const LayerSpec& s : cfg.layers)
    f += layer_row_flops(cfg, s) + 4.0 * cfg.n_heads * s.head_dim * keys_seen(cfg, s, ctx, static_cast<double>(rows));
  const double H = cfg.hidden, V = static_cast<double>(cfg.vocab);
  f += 2.0 * H * V;                       // lm_head
  f += 2.0 * V * H + 2.0 * 3.0 * H * cfg.intermediate;  // exact soft embedding GEMM and the SC MLP
  return f;
}

double encode_flops(const ModelConfig& cfg, int64_t ctx, int64_t n) {
  double f = 0;
  for (const LayerSpec& s : cfg.layers) {
    const double fresh = s.sliding ? 0.0 : static_cast<double>(n) / 2.0;  // causal: half the chunk on average
    const double keys = s.sliding ? std::min<double>(static_cast<double>(ctx) + n / 2.0, cfg.window)
                                  : keys_seen(cfg, s, ctx, fresh);
    f += static_cast<double>(n) * (layer_row_flops(cfg, s) + 4.0 * cfg.n_heads * s.head_dim * keys);
  }
  return f;
}

namespace {

// One batched denoise step of n canvases over n prompts of prompt_tokens, timed, then issued op by op with the
// backend's stage events: where the batched step spends its time (the serve passes above only time it whole).
void batched_step_stages(const Model& model, const ServeBenchOptions& o, int n,
                         const std::function<KvCache(int64_t context)>& new_cache,
                         const std::function<void(nlohmann::json)>& emit) {
  const ModelConfig& cfg = model.config();
  Backend& be = model.backend();
  std::vector<KvCache> caches;
  caches.reserve(static_cast<size_t>(n));
  ModelBatchDenoiser d(model, o.logit_rows);
  std::vector<std::vector<int32_t>> canvases;
  std::vector<std::vector<RowStats>> stats(static_cast<size_t>(n), std::vector<RowStats>(cfg.canvas));
  std::vector<BatchItem> items;
  for (int i = 0; i < n; ++i) {
    caches.push_back(new_cache(o.prompt_tokens + cfg.canvas));
    model.encode(caches.back(), synthetic_ids(o.prompt_tokens, cfg.vocab, o.seed * 104729 + static_cast<uint64_t>(i)));
    canvases.push_back(synthetic_ids(cfg.canvas, cfg.vocab, o.seed * 15485863 + static_cast<uint64_t>(i)));
  }
  for (int i = 0; i < n; ++i) {
    BatchItem it;
    it.seq = d.open();
    it.kv = &caches[static_cast<size_t>(i)];
    it.step = StepRequest{canvases[static_cast<size_t>(i)], ScKind::kZero, 0.8f, static_cast<float>(o.sc_cutoff), {}};
    it.stats = stats[static_cast<size_t>(i)].data();
    items.push_back(it);
  }
  d.denoise(items);  // step 1 (zero self-conditioning); later steps condition on its logits
  for (BatchItem& it : items) it.step.kind = ScKind::kLogits;
  d.denoise(items);
  be.synchronize();
  constexpr int kSteps = 3;
  const double t0 = serve_clock_s();
  for (int s = 0; s < kSteps; ++s) {
    if (s == 0 && o.profile_step) be.profiler_range(true);
    d.denoise(items);
    if (s == 0 && o.profile_step) {
      be.synchronize();
      be.profiler_range(false);
    }
  }
  be.synchronize();
  const double ms = (serve_clock_s() - t0) * 1000.0 / kSteps;
  be.set_profiling(true);
  d.denoise(items);
  be.stage("end");
  nlohmann::json stages = nlohmann::json::object();
  for (const auto& [name, t] : be.take_stage_times()) stages[name] = t;
  be.set_profiling(false);
  const int64_t rows = static_cast<int64_t>(n) * cfg.canvas;
  const double tflop = static_cast<double>(rows) * denoise_flops_per_row(cfg, o.prompt_tokens, cfg.canvas) / 1e12;
  emit({{"event", "serve_step"}, {"streams", n}, {"rows", rows}, {"context", o.prompt_tokens}, {"ms_per_step", ms},
        {"tflop_per_s", tflop / (ms / 1000.0)}, {"stages_ms", stages}});
}

}  // namespace

void run_bench_serve(const Model& model, const ServeBenchOptions& o,
                     const std::function<KvCache(int64_t context)>& new_cache,
                     const std::function<void(nlohmann::json)>& emit) {
  const ModelConfig& cfg = model.config();
  Backend& be = model.backend();
  SamplerOptions so = fixed_step_options(o.steps, o.gen_tokens);
  so.sc_sparse_cutoff = o.sc_cutoff;
  const int64_t context = o.prompt_tokens + o.gen_tokens + cfg.canvas;

  for (int pass = 0; pass <= static_cast<int>(o.streams.size()); ++pass) {
    const bool warm_up = pass == 0;  // one short stream: kernels, allocator pools
    const int n = warm_up ? 1 : o.streams[static_cast<size_t>(pass - 1)];
    SamplerOptions opt = so;
    if (warm_up) {
      opt.steps = 2;
      opt.max_new_tokens = cfg.canvas;
    }
    std::vector<KvCache> caches;
    caches.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) caches.push_back(new_cache(context));
    std::vector<double> first_block(static_cast<size_t>(n), -1.0);
    std::vector<GenerateEvents> events(static_cast<size_t>(n));
    double flops = 0, t0 = 0;
    for (int i = 0; i < n; ++i) {
      const KvCache* kv = &caches[static_cast<size_t>(i)];
      events[static_cast<size_t>(i)].on_step = [&flops, &cfg, kv](const StepInfo&, const StepView& v) {
        const auto rows = static_cast<int64_t>(v.argmax.size());
        flops += static_cast<double>(rows) * denoise_flops_per_row(cfg, kv->len(), rows);
      };
      events[static_cast<size_t>(i)].on_block = [&first_block, &t0, i](const BlockInfo&, std::span<const int32_t>) {
        double& f = first_block[static_cast<size_t>(i)];
        if (f < 0) f = serve_clock_s() - t0;
      };
    }
    ModelBatchDenoiser d(model, o.logit_rows);
    BatchRunner runner(d, BatchOptions{n, o.prefill_tokens});
    for (int i = 0; i < n; ++i) {
      SamplerOptions oi = opt;
      oi.seed = o.seed + static_cast<uint64_t>(i);
      runner.add(caches[static_cast<size_t>(i)],
                 synthetic_ids(o.prompt_tokens, cfg.vocab, o.seed * 7919 + static_cast<uint64_t>(i)), oi,
                 &events[static_cast<size_t>(i)]);
    }
    for (int i = 0; i < n; ++i) flops += encode_flops(cfg, 0, o.prompt_tokens);
    be.synchronize();
    t0 = serve_clock_s();
    int rounds = 0, steps = 0;
    int64_t tokens = 0;
    double occupancy = 0;
    while (!runner.idle()) {
      const int k = runner.round();
      ++rounds;
      if (k > 0) {
        ++steps;
        occupancy += k;
      }
      for (BatchRunner::Done& done : runner.take_finished()) {
        tokens += static_cast<int64_t>(done.result.tokens.size());
        // Committed blocks after the first were encoded too (the last one is not).
        const int64_t enc = static_cast<int64_t>(done.result.committed.size()) -
                            (done.result.blocks.empty() ? 0 : done.result.blocks.back().kept);
        flops += encode_flops(cfg, o.prompt_tokens, enc);
      }
    }
    be.synchronize();
    const double total = serve_clock_s() - t0;
    if (warm_up) continue;
    emit({{"event", "serve"}, {"streams", n}, {"prompt_tokens", o.prompt_tokens}, {"gen_tokens", o.gen_tokens},
          {"steps_per_block", o.steps}, {"seconds", total}, {"committed_tokens", tokens},
          {"aggregate_tok_per_s", static_cast<double>(tokens) / total},
          {"first_block_p50_s", percentile(first_block, 0.5)}, {"first_block_p99_s", percentile(first_block, 0.99)},
          {"batched_steps", steps}, {"rounds", rounds}, {"mean_occupancy", steps > 0 ? occupancy / steps : 0.0},
          {"tflop", flops / 1e12}, {"tflop_per_s", flops / 1e12 / total}, {"prefill_tokens_per_round", o.prefill_tokens},
          {"logit_rows", o.logit_rows}, {"peak_gib", static_cast<double>(be.peak_memory()) / 1073741824.0}});
  }
  if (!o.streams.empty()) batched_step_stages(model, o, *std::max_element(o.streams.begin(), o.streams.end()),
                                              new_cache, emit);
}

}  // namespace dg::cli
