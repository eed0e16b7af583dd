// `diffgemma bench`: prefill throughput, denoise step latency with a per-stage breakdown, and end-to-end committed
// tokens per second at a fixed step count, on a checkpoint or on the full DiffusionGemma 26B-A4B shape with
// weights generated on the device. A table on stdout (one JSON object per line with --json), what is being measured
// on stderr, and the JSON lines appended to --out.
#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/bench_serve.h"
#include "cli/data_paths.h"
#include "cli/option_checks.h"
#include "core/error.h"
#include "diffusion/generate.h"
#include "diffusion/rng.h"
#include "model/synthetic.h"
#include "ops/self_cond/self_cond.h"

namespace dg::cli {
namespace {

#if defined(DG_WITH_CUDA)
constexpr const char* kDefaultBackend = "cuda";
#else
constexpr const char* kDefaultBackend = "cpu";
#endif

struct BenchOptions {
  std::string model;       // empty: synthetic on cuda; the embedded model on cpu unless --layers
  std::string backend = kDefaultBackend;
  int layers = 0;          // synthetic: keep the first N layers (0: all 30)
  std::string weights = "bf16";  // synthetic: bf16 | q4 | fp8 | nvfp4 (experts; the SC MLP q8)
  std::vector<int> prefill{512, 4096};
  std::vector<int> context{1024};
  int denoise_steps = 8;   // timed denoise forwards per context
  int64_t prefill_chunk = 4096;
  bool graphs = true;      // replay denoise steps through CUDA graphs (as ask, chat and serve do)
  bool early_capture = true;  // a block's graph captured while its first step runs (as ask, chat and serve do)
  bool fused_commit = true;    // a committed block encoded in the next block's first step (--no-fused-commit: apart)
  std::string expert_act = "auto";  // the experts' activation operand (set_expert_act)
  std::string linear_act = "auto";  // fp8 linears' activation operand (linear_act_fp8)
  std::string vocab_act = "bf16";   // the vocabulary products' operands (vocab_act_fp8)
  std::string attention_topk = "off";  // full layers' top-k sparse attention (Model::set_attention_topk)
  bool host_decisions = false;  // the generation run decides each step on the host (A/B against the decide op)
  std::string self_conditioning = "exact";  // the generation and serve runs' soft embedding: exact | sparse
  int64_t peaked = 0;  // synthetic: tokens whose logits peak (synthetic_weights)
  int steps = 16;          // denoise steps per block in the generation run
  int prompt_tokens = 1024, gen_tokens = 1024;
  bool skip_generate = false;
  uint64_t seed = 1;
  std::string out;
  std::string label;
  std::string git_sha;  // recorded with every line (default: asked from git in the source tree)
  CudaKernels kernels;
  // "prefill": the second pass of the last prefill length; "denoise": the first timed step of each context; the
  // range a profiler started with --profile-from-start off records (ncu: docs/PERFORMANCE.md)
  std::string profile_range;
  bool serve = false;          // the batched load benchmark (cli/bench_serve.h) instead of the runs above
  ServeBenchOptions serve_opt;
  bool json = false;   // JSON lines on stdout instead of the table
  bool quiet = false;  // no progress on stderr
};

// The generation and serve runs' survivor cutoff (--self-conditioning).
double sc_cutoff(const BenchOptions& o) { return o.self_conditioning == "sparse" ? kSparseScCutoff : 0.0; }

std::string git_sha() {
  std::string cmd = std::string("git -C '") + DG_SOURCE_DIR + "' rev-parse --short HEAD 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return "unknown";
  char buf[64] = {0};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, p);
  ::pclose(p);
  std::string s(buf, n);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s.empty() ? "unknown" : s;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One result line per measurement: a row of the table (or the JSON line) on stdout, the JSON line in --out.
class Reporter {
 public:
  Reporter(const BenchOptions& o, nlohmann::json base) : json_(o.json), base_(std::move(base)) {
    if (!o.out.empty()) out_.open(o.out, std::ios::app);
    DG_CHECK(o.out.empty() || out_.good(), "cannot append to '{}'", o.out);
    const std::string label = base_["label"], backend = base_["backend"], device = base_["device"];
    if (!json_)
      std::cout << fmt::format("diffgemma bench · {} · {} · {} layers · weights {} · commit {}{}\n",
                               base_["model"].get<std::string>(),
                               device == backend ? backend : fmt::format("{} on {}", backend, device),
                               base_["layers"].get<int>(),
                               base_["weights"].get<std::string>(), base_["git_sha"].get<std::string>(),
                               label.empty() ? "" : " · " + label)
                << std::flush;
  }
  void emit(nlohmann::json j) {
    for (auto& [k, v] : base_.items()) j[k] = v;
    const std::string line = j.dump();
    std::cout << (json_ ? line : row(j)) << "\n" << std::flush;
    if (out_.is_open()) out_ << line << "\n" << std::flush;
  }

 private:
  static std::string stages(const nlohmann::json& s) {
    std::string out;
    for (const auto& [name, ms] : s.items())
      out += fmt::format("{}{} {:.2f}", out.empty() ? "" : ", ", name, ms.get<double>());
    return out.empty() ? "" : "\n  " + std::string(12, ' ') + "stages (ms): " + out;
  }
  static std::string row(const nlohmann::json& j) {
    const std::string ev = j["event"];
    auto d = [&](const char* k) { return j[k].get<double>(); };
    if (ev == "loaded")
      return fmt::format("  {:<10} {:.2f} s, {:.2f} GiB on the device", ev, d("seconds"), d("weight_gib"));
    if (ev == "prefill")
      return fmt::format("  {:<10} {:>7} tokens       {:>9.2f} ms   {:>10.1f} tokens/s", ev, j["tokens"].get<int>(),
                         1000 * d("seconds"), d("tok_per_s"));
    if (ev == "denoise")
      return fmt::format("  {:<10} {:>7} context      {:>9.2f} ms/step (canvas {}){}", ev, j["context"].get<int>(),
                         d("ms_per_step"), j["canvas"].get<int>(), stages(j["stages_ms"]));
    if (ev == "generate")
      return fmt::format("  {:<10} {:>7} in / {} out  {:>9.2f} s      {:>10.1f} tokens/s committed, {} steps/block, "
                         "first block {:.3f} s",
                         ev, j["prompt_tokens"].get<int>(), j["new_tokens"].get<int>(), d("seconds"),
                         d("committed_tok_per_s"), j["steps_per_block"].get<int>(), d("time_to_first_block_s"));
    if (ev == "serve")
      return fmt::format("  {:<10} {:>7} streams      {:>9.2f} s      {:>10.1f} tokens/s in all, first block p50 "
                         "{:.3f} s p99 {:.3f} s, occupancy {:.2f}, {:.1f} TFLOP/s",
                         ev, j["streams"].get<int>(), d("seconds"), d("aggregate_tok_per_s"), d("first_block_p50_s"),
                         d("first_block_p99_s"), d("mean_occupancy"), d("tflop_per_s"));
    if (ev == "serve_step")
      return fmt::format("  {:<10} {:>7} streams      {:>9.2f} ms/step ({} rows, {:.1f} TFLOP/s){}", "step",
                         j["streams"].get<int>(), d("ms_per_step"), j["rows"].get<int>(), d("tflop_per_s"),
                         stages(j["stages_ms"]));
    if (ev == "memory") return fmt::format("  {:<10} peak {:.2f} GiB", ev, d("peak_gib"));
    return "  " + j.dump();
  }

  bool json_;
  nlohmann::json base_;
  std::ofstream out_;
};

// What is being measured, on stderr: "[i/n] what".
class BenchProgress {
 public:
  BenchProgress(bool quiet, int total) : quiet_(quiet), total_(total) {}
  void next(const std::string& what) {
    if (!quiet_) fmt::print(stderr, "bench [{}/{}] {}\n", ++at_, total_, what);
  }

 private:
  bool quiet_;
  int total_, at_ = 0;
};

nlohmann::json stage_json(Backend& be, double scale) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, ms] : be.take_stage_times()) j[name] = ms * scale;
  return j;
}

void run_bench(const BenchOptions& o) {
  const int stages = 1 + (o.serve ? static_cast<int>(o.serve_opt.streams.size()) + 1
                                  : static_cast<int>(o.prefill.size() + o.context.size()) + (o.skip_generate ? 0 : 1));
  BenchProgress progress(o.quiet, stages);
  progress.next(o.model.empty() ? fmt::format("loading the synthetic 26B-A4B shape on {}", o.backend)
                                : fmt::format("loading {} on {}", o.model, o.backend));
  const double t_load = now_s();
  // One path builds the model from options: the engine's (a checkpoint, or the synthetic shape of --layers and
  // --weights drawn from --seed), with the benchmark's kernel choices.
  EngineOptions eo;
  eo.model_dir = o.model.empty() ? "synthetic:26b-a4b:" + o.weights : o.model;
  eo.backend = o.backend;
  eo.prefill_chunk = o.prefill_chunk;
  eo.graphs = o.graphs;
  eo.early_capture = o.early_capture;
  eo.fused_commit = o.fused_commit;
  eo.expert_act = o.expert_act;
  eo.linear_act = o.linear_act;
  eo.vocab_act = o.vocab_act;
  eo.attention_topk = o.attention_topk;
  const std::unique_ptr<EngineCore> engine = EngineCore::open(eo, EngineTuning{o.kernels, o.layers, o.seed, o.peaked});
  const ModelConfig& cfg = engine->config();
  Backend* const be = &engine->backend();
  const Model& model = engine->model();
  int64_t max_ctx = o.prompt_tokens + o.gen_tokens + cfg.canvas;
  for (int p : o.prefill) max_ctx = std::max<int64_t>(max_ctx, p);
  for (int c : o.context) max_ctx = std::max<int64_t>(max_ctx, c + cfg.canvas);
  auto new_cache = [&] { return engine->new_cache(max_ctx); };
  Reporter rep(o, {{"git_sha", o.git_sha.empty() ? git_sha() : o.git_sha}, {"device", be->device_name()}, {"backend", be->name()},
                   {"model", o.model.empty() ? "synthetic-26b-a4b" : o.model}, {"layers", cfg.n_layers},
                   {"label", o.label}, {"attention_kernel", o.kernels.attention == AttentionKernel::kFlash ? "flash/" + std::to_string(o.kernels.attention_cols) : std::string(kernel_name(o.kernels.attention))}, {"moe_kernel", o.kernels.moe == MoeKernel::kAuto ? "auto/" + std::to_string(o.kernels.moe_auto_rows) : std::string(kernel_name(o.kernels.moe))}, {"moe_a8_stages", o.kernels.moe_a8_stages}, {"moe_col_tiles", std::to_string(o.kernels.moe_up_col_tiles) + "," + std::to_string(o.kernels.moe_down_col_tiles)}, {"moe_q4_stages", o.kernels.moe_q4_stages}, {"moe_q4_consumers", o.kernels.moe_q4_consumers}, {"attention_segments", std::string(kernel_name(o.kernels.attention_segments))}, {"attention_pairs", o.kernels.attention_pairs}, {"attention_wgmma", std::string(kernel_name(o.kernels.attention_wgmma))}, {"fused_norms", o.kernels.fused_norms}, {"rope_table_rows", o.kernels.rope_table_rows}, {"moe_group_blocks", o.kernels.moe_group_blocks}, {"moe_route_fused", o.kernels.moe_route_fused}, {"moe_inputs_fused", o.kernels.moe_inputs_fused}, {"next_norm_fused", o.kernels.next_norm_fused}, {"moe_route_ahead", o.kernels.moe_route_ahead}, {"moe_experts_ahead", o.kernels.moe_experts_ahead}, {"graph_arena", o.kernels.graph_arena}, {"q4_layout", o.kernels.q4_kernel_layout ? "kernel" : "disk"}, {"q4_tiles", o.kernels.q4_tiles}, {"fp8_tiles", o.kernels.fp8_tiles}, {"bf16_tiles", o.kernels.bf16_tiles}, {"pdl", o.kernels.pdl}, {"a8_linears", o.kernels.a8_linears_stream ? "stream" : "cublaslt"}, {"a8_scales", o.kernels.a8_scales_on_load ? "on_load" : "pass"}, {"a8_row_codes", o.kernels.a8_row_codes}, {"dense_stream", o.kernels.dense_stream}, {"softcap_in_stats", o.kernels.softcap_in_stats}, {"softcap_in_stats_single", o.kernels.softcap_in_stats_single}, {"row_stats_groups", o.kernels.row_stats_groups}, {"soft_probs_loads", o.kernels.soft_probs_loads}, {"sc_survivors", o.kernels.sc_survivors}, {"self_conditioning", o.self_conditioning}, {"peaked_tokens", o.peaked}, {"a8_rows", std::string(kernel_name(o.kernels.a8_rows))},
                   {"weights", o.model.empty() ? o.weights : "checkpoint"},
                   {"prefill_chunk", o.prefill_chunk}, {"graphs", o.graphs}, {"early_capture", o.early_capture}, {"fused_commit", o.fused_commit}, {"expert_act", o.expert_act}, {"linear_act", o.linear_act}, {"vocab_act", o.vocab_act},
                   {"attention_topk", attn_topk_name(model.attention_topk())},
                   {"decisions", o.host_decisions || (o.backend == "cuda" && o.kernels.decide == DecideMode::kHost) ? "host" : "backend"}});
  rep.emit({{"event", "loaded"}, {"seconds", now_s() - t_load}, {"weight_gib", be->peak_memory() / 1073741824.0}});
  if (o.serve) {
    auto cache_for = [&](int64_t context) { return engine->new_cache(context); };
    progress.next(fmt::format("serving {} concurrent requests", o.serve_opt.streams.front()));
    size_t done = 0;
    run_bench_serve(model, o.serve_opt, cache_for, [&](nlohmann::json j) {
      if (j["event"] == "serve" && ++done <= o.serve_opt.streams.size())
        progress.next(done < o.serve_opt.streams.size()
                          ? fmt::format("serving {} concurrent requests", o.serve_opt.streams[done])
                          : std::string("one batched step of the largest count, by stage"));
      rep.emit(std::move(j));
    });
    rep.emit({{"event", "memory"}, {"peak_gib", be->peak_memory() / 1073741824.0}});
    return;
  }

  for (int P : o.prefill) {
    progress.next(fmt::format("prefill of {} tokens", P));
    const auto ids = synthetic_ids(P, cfg.vocab, o.seed + static_cast<uint64_t>(P));
    for (int rep_i = 0; rep_i < 2; ++rep_i) {  // the first pass warms up kernels and the allocator
      KvCache kv = new_cache();
      be->synchronize();
      const bool profiled = rep_i == 1 && o.profile_range == "prefill" && P == o.prefill.back();
      if (profiled) be->profiler_range(true);
      const double t0 = now_s();
      model.encode(kv, ids);
      be->synchronize();
      if (profiled) be->profiler_range(false);
      const double dt = now_s() - t0;
      if (rep_i == 1) rep.emit({{"event", "prefill"}, {"tokens", P}, {"seconds", dt}, {"tok_per_s", P / dt}});
    }
  }

  for (int L : o.context) {
    progress.next(fmt::format("denoise steps over {} tokens of context", L));
    KvCache kv = new_cache();
    model.encode(kv, synthetic_ids(L, cfg.vocab, o.seed + 7));
    ModelDenoiser d(model);
    const auto canvas = synthetic_ids(cfg.canvas, cfg.vocab, o.seed + 9);
    std::vector<RowStats> stats(static_cast<size_t>(cfg.canvas));
    const auto cutoff = static_cast<float>(sc_cutoff(o));  // --self-conditioning: exact, or the contract's cutoff
    d.denoise(kv, canvas, ScKind::kZero, cutoff, 0.8f, stats.data());  // warm-up (and the graph capture)
    d.denoise(kv, canvas, ScKind::kLogits, cutoff, 0.8f, stats.data());
    be->synchronize();
    const double t0 = now_s();
    for (int i = 0; i < o.denoise_steps; ++i) {
      const bool profiled = i == 0 && o.profile_range == "denoise";
      if (profiled) be->profiler_range(true);
      d.denoise(kv, canvas, ScKind::kLogits, cutoff, 0.8f, stats.data());
      if (profiled) {
        be->synchronize();
        be->profiler_range(false);
      }
    }
    be->synchronize();
    const double ms = (now_s() - t0) * 1000.0 / o.denoise_steps;
    be->set_profiling(true);  // stage times need the ops issued one by one
    d.set_graphs(false);
    for (int i = 0; i < 2; ++i) d.denoise(kv, canvas, ScKind::kLogits, cutoff, 0.8f, stats.data());
    be->stage("end");
    nlohmann::json stages = stage_json(*be, 0.5);
    be->set_profiling(false);
    rep.emit({{"event", "denoise"}, {"context", L}, {"canvas", cfg.canvas}, {"ms_per_step", ms},
              {"stages_ms", stages}});
  }

  if (!o.skip_generate) {
    progress.next(fmt::format("generation of {} tokens after {}, {} steps per block", o.gen_tokens, o.prompt_tokens,
                              o.steps));
    SamplerOptions so = fixed_step_options(o.steps, o.gen_tokens);
    so.seed = o.seed;
    so.sc_sparse_cutoff = sc_cutoff(o);
    so.host_decisions = o.host_decisions;
    KvCache kv = new_cache();
    const auto prompt = synthetic_ids(o.prompt_tokens, cfg.vocab, o.seed + 11);
    double first_block = -1;
    std::vector<double> block_ends;  // seconds from the start to each block's commit
    be->synchronize();
    const GraphStats g0 = be->graph_stats();
    const double t0 = now_s();
    GenerateEvents ev;
    ev.on_block = [&](const BlockInfo&, std::span<const int32_t>) {
      block_ends.push_back(now_s() - t0);
      if (first_block < 0) first_block = block_ends.back();
    };
    ModelDenoiser d(model);
    const GenerateResult r = generate(d, kv, prompt, so, &ev);
    be->synchronize();
    const double total = now_s() - t0;
    const GraphStats g1 = be->graph_stats();
    rep.emit({{"event", "generate"}, {"prompt_tokens", o.prompt_tokens}, {"new_tokens", r.tokens.size()},
              {"steps_per_block", o.steps}, {"forwards", r.forwards},
              {"fused_commits", r.fused_commits}, {"seconds", total},
              {"graph_instantiations", g1.instantiations - g0.instantiations},
              {"graph_updates", g1.updates - g0.updates},
              {"graph_host_s", {{"capture", g1.capture_s - g0.capture_s},
                                {"instantiate", g1.instantiate_s - g0.instantiate_s},
                                {"update", g1.update_s - g0.update_s}}},
              {"block_ends_s", block_ends},
              {"committed_tok_per_s", static_cast<double>(r.tokens.size()) / total},
              {"time_to_first_block_s", first_block}});
  }
  rep.emit({{"event", "memory"}, {"peak_gib", be->peak_memory() / 1073741824.0}});
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> v;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t comma = s.find(',', pos);
    const std::string part = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!part.empty()) {
      try {
        v.push_back(std::stoi(part));
      } catch (const std::logic_error&) {
        fail("'{}' is not a number in the list '{}'", part, s);
      }
      DG_CHECK(v.back() > 0, "list values must be positive ('{}')", s);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return v;
}

}  // namespace

void register_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto prefill = std::make_shared<std::string>("512,4096");
  auto context = std::make_shared<std::string>("1024");
  CLI::App* cmd = app.add_subcommand("bench", "measure prefill, denoise steps and generation throughput");
  cmd->add_option("-m,--model", o->model,
                  "checkpoint directory (default: on cuda the 26B-A4B shape with random weights, on cpu the embedded "
                  "model; --layers N: that shape's first N layers)");
  cmd->add_option("--backend", o->backend, "cpu | cuda (default: cuda when built in)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "one JSON object per line on stdout instead of the table (--out always gets them)");
  cmd->add_flag("-q,--quiet", o->quiet, "no progress on stderr");
  cmd->add_option("--prefill-chunk", o->prefill_chunk, "encode prompts in chunks of this many tokens")
      ->check(positive_int())
      ->capture_default_str();
  cmd->add_flag("--graphs,!--no-graphs", o->graphs,
                "replay denoise steps through CUDA graphs, as ask, chat and serve do (default; needs a MoE kernel "
                "other than cublas); --no-graphs issues them op by op")
      ->check(switch_value());
  cmd->add_flag("--early-capture,!--no-early-capture", o->early_capture,
                "capture a block's graphed steps while its first step runs on the device, as ask, chat and serve do "
                "(default); --no-early-capture captures them after it (A/B)")
      ->check(switch_value());
  cmd->add_flag("--fused-commit,!--no-fused-commit", o->fused_commit,
                "encode each committed block in the forward of the next block's first step (--serve: in the round's "
                "denoise forward), as ask, chat and serve do (default); --no-fused-commit encodes it alone (A/B, the "
                "same tokens)")
      ->check(switch_value());
  cmd->add_option("--expert-act", o->expert_act,
                  "activations of the MoE experts: auto (fp8 for fp8 experts: W8A8) | bf16 | fp8")
      ->check(CLI::IsMember({"auto", "bf16", "fp8"}))
      ->capture_default_str();
  cmd->add_option("--linear-act", o->linear_act, linear_act_help())
      ->check(CLI::IsMember({"auto", "bf16", "fp8"}))
      ->capture_default_str();
  cmd->add_option("--vocab-act", o->vocab_act, vocab_act_help())
      ->check(CLI::IsMember({"bf16", "fp8", "fp8-lm-head"}))
      ->capture_default_str();
  cmd->add_option("--attention-topk", o->attention_topk, attention_topk_help())
      ->check(attention_topk_value())
      ->capture_default_str();
  cmd->add_flag("--host-decisions", o->host_decisions,
                "generation run: decide each step on the host instead of the backend (A/B; same tokens)");
  cmd->add_option("--self-conditioning", o->self_conditioning,
                  "denoise steps, generation and --serve runs: the soft embedding over the whole vocabulary "
                  "(exact, the reference profile's) or over the tokens within e^-10 of the best (sparse, the "
                  "contract sampler's, which ask, chat and serve run; random weights keep most of the vocabulary: "
                  "see --peaked-vocab)")
      ->check(CLI::IsMember({"exact", "sparse"}))
      ->capture_default_str();
  cmd->add_option("--peaked-vocab", o->peaked,
                  "synthetic model: the tied table's rows past the first N scaled down, so the logits peak on those N "
                  "tokens as a trained model's do on a few (0: the uniform table)")
      ->check(non_negative_int());
  cmd->add_option("--layers", o->layers, "synthetic model: keep the first N layers (0: all)")->check(non_negative_int());
  cmd->add_option("--weights", o->weights,
                  "synthetic model: bf16 | q4 | fp8 | nvfp4 (packed experts with random codes, q8 self-conditioning "
                  "MLP, as the quantize profiles store them) | fp8-all (experts, attention, dense and "
                  "self-conditioning MLP fp8) | q4-fp8 (q4 experts; attention, dense and self-conditioning MLP fp8)")
      ->check(CLI::IsMember(std::vector<std::string>(kSyntheticProfiles.begin(), kSyntheticProfiles.end())))
      ->capture_default_str();
  cmd->add_option("--prefill", *prefill, "prompt lengths to time (comma separated)")
      ->check(positive_int_list())
      ->capture_default_str();
  cmd->add_option("--context", *context, "cached context lengths for the denoise-step timing")
      ->check(positive_int_list())
      ->capture_default_str();
  cmd->add_option("--denoise-steps", o->denoise_steps, "timed denoise forwards per context")
      ->check(positive_int())
      ->capture_default_str();
  cmd->add_option("--steps", o->steps, "denoising steps per block in the generation run")
      ->check(positive_int())
      ->capture_default_str();
  cmd->add_option("--prompt-tokens", o->prompt_tokens, "generation run: prompt length")
      ->check(positive_int())
      ->capture_default_str();
  cmd->add_option("--gen-tokens", o->gen_tokens, "generation run: tokens to generate")
      ->check(positive_int())
      ->capture_default_str();
  cmd->add_flag("--skip-generate", o->skip_generate, "skip the end-to-end generation run");
  cmd->add_option("--seed", o->seed, "weights and token seed")->check(non_negative_int())->capture_default_str();
  cmd->add_option("--out", o->out, "also append the JSON lines to this file (e.g. bench/results/h200.jsonl)");
  cmd->add_option("--label", o->label, "free text recorded with every line");
  add_choice(cmd, "--attention", o->kernels.attention, kAttentionKernelNames,
             "CUDA attention kernel: flash | gemm | warp");
  cmd->add_option("--attention-cols", o->kernels.attention_cols,
                  "--attention flash: output columns per block, 128 | 256 (head dims above it recompute the scores "
                  "once per slice)")
      ->check(CLI::IsMember({128, 256}))
      ->capture_default_str();
  cmd->add_option("--attention-pairs", o->kernels.attention_pairs,
                  "--attention flash: head dims from this one up (256 | 512; 0: none) run the warp-pair block (8 "
                  "warps take the whole head, the scores computed once)")
      ->check(CLI::IsMember({0, 256, 512}))
      ->capture_default_str();
  add_choice(cmd, "--attention-segments", o->kernels.attention_segments, kSegmentsModeNames,
             "CUDA batched steps (--serve): one flash launch over every sequence (one), one call per sequence "
             "(each), or one launch when the sequences' tiles fill the GPU (auto)");
  add_choice(cmd, "--moe", o->kernels.moe, kMoeKernelNames,
             "CUDA MoE expert GEMMs: cublas (grouped GEMM) | stream (ours, weights streamed once) | "
             "wmma (ours, fragments from global memory) | wide (stream in passes of 128 rows for bf16 and W8A8 "
             "experts: large batches; other packed experts stream as with stream) | ws (wide, with the W8A8, "
             "bf16 and q4 experts in the persistent warp-specialised kernels; Hopper) | auto (q4: ws on Hopper at "
             "every size; calls of at least --moe-auto-rows tokens: wide for bf16 and W8A8 experts, ws from twice "
             "as many on Hopper, cublas for other unpacked experts outside graph captures; stream otherwise)");
  add_choice(cmd, "--decide", o->kernels.decide, kDecideModeNames,
             "CUDA: where the sampler's per-step decisions run: device (the decide kernel: one small status read "
             "per step) | host (row statistics and draws read every step; A/B, same tokens)");
  cmd->add_flag("!--unfused-norms", o->kernels.fused_norms,
                "CUDA: issue the residual chains and the per-head norm + RoPE op by op (A/B of the fused kernels)")
      ->check(switch_value());
  cmd->add_option("--rope-table-rows", o->kernels.rope_table_rows,
                  "CUDA per-head norms of calls of at least this many rows: each row's rotation computed once into a "
                  "table its heads read, instead of a sincos per head and element (the same bits; 0: every call)")
      ->check(non_negative_int())
      ->capture_default_str();
  cmd->add_flag("--moe-route-fused,!--moe-route-apart", o->kernels.moe_route_fused,
                "CUDA MoE routing and grouping of up to 512 rows (128 experts) in one launch whose last block "
                "groups (default; the same bits); --moe-route-apart: two launches (A/B)")
      ->check(switch_value());
  cmd->add_flag("--moe-inputs-fused,!--moe-inputs-apart", o->kernels.moe_inputs_fused,
                "CUDA W8A8 MoE inputs (router input, z's codes) from the residual chain's launch (default); "
                "--moe-inputs-apart: their own launch (A/B; the router input may round apart by a bf16 step)")
      ->check(switch_value());
  cmd->add_flag("--next-norm-fused,!--next-norm-apart", o->kernels.next_norm_fused,
                "CUDA next layer's input norm and its E4M3 rows from the feed-forward tail's launch (default; the "
                "same bytes); --next-norm-apart: their own launch (A/B)")
      ->check(switch_value());
  cmd->add_flag("--moe-route-ahead,!--moe-route-inline", o->kernels.moe_route_ahead,
                "CUDA MoE routing on a stream of its own beside the dense MLP, joined before the experts (default; "
                "the same bits); --moe-route-inline: in the MoE's place (A/B)")
      ->check(switch_value());
  cmd->add_flag("--moe-experts-ahead,!--moe-experts-in-place", o->kernels.moe_experts_ahead,
                "CUDA W8A8 expert products (one to three canvases) issued on the routing's stream right after it "
                "(with --moe-route-ahead, the default), so the dense MLP runs beside them, joined before the "
                "feed-forward tail (default; the same bits); --moe-experts-in-place: after the dense MLP (A/B)")
      ->check(switch_value());
  cmd->add_flag("--graph-arena,!--no-graph-arena", o->kernels.graph_arena,
                "CUDA graphs: a captured step's buffers from an arena the backend holds, at the same addresses each "
                "capture, so a block's graph is updated in place (default; the same bits); --no-graph-arena: "
                "cudaMallocAsync memory nodes, a new instantiation each block (A/B)")
      ->check(switch_value());
  cmd->add_flag("--moe-group-blocks,!--no-moe-group-blocks", o->kernels.moe_group_blocks,
                "CUDA MoE grouping of more than 8,192 routed pairs: blocks of 2,048 pairs in three launches instead "
                "of one block (default; the same result); --no-moe-group-blocks: one block (A/B)")
      ->check(switch_value());
  cmd->add_flag("!--q4-disk-layout", o->kernels.q4_kernel_layout,
                "CUDA q4 weights: keep the pack's layout and its conversion instead of the kernel layout made at "
                "upload (A/B of the q4 streaming kernels)")
      ->check(switch_value());
  cmd->add_flag("--q4-tiles,!--no-q4-tiles", o->kernels.q4_tiles,
                "CUDA q4 experts for the warp-specialised kernel: the kernel layout in stage tiles, 64 rows of a "
                "stage in one run of bytes (default); --no-q4-tiles: the kernel layout's rows (A/B, the same bits)")
      ->check(switch_value());
  cmd->add_flag("--fp8-tiles,!--no-fp8-tiles", o->kernels.fp8_tiles,
                "CUDA fp8 experts: the codes in stage tiles, 64 rows of a stage in one run of bytes (default); "
                "--no-fp8-tiles: the rows as the pack stores them (A/B, the same bits)")
      ->check(switch_value());
  cmd->add_flag("--bf16-tiles,!--no-bf16-tiles", o->kernels.bf16_tiles,
                "CUDA bf16 experts: the weights in stage tiles, 64 rows of a stage in one run of bytes (default); "
                "--no-bf16-tiles: the rows as stored (A/B, the same bits)")
      ->check(switch_value());
  add_choice(cmd, "--attention-wgmma", o->kernels.attention_wgmma, kWgmmaModeNames,
             "--attention flash, head dims 256 and 512: the Hopper wgmma blocks: "
             "auto (where the device runs the sm_90a code), on (an error elsewhere), off");
  cmd->add_flag("--pdl,!--no-pdl", o->kernels.pdl,
                "CUDA (compute capability 9.0+): programmatic dependent launch, each kernel's blocks launched while "
                "the one before it finishes (A/B; default off)")
      ->check(switch_value());
  cmd->add_flag("--a8-linears-stream,!--a8-linears-cublaslt", o->kernels.a8_linears_stream,
                "CUDA W8A8 linears (--linear-act): the streaming kernel, the scales in its epilogue, instead of "
                "cuBLASLt's e4m3 product and a row-scaled epilogue (A/B, slower; default off)")
      ->check(switch_value());
  cmd->add_flag("--a8-scales-on-load,!--a8-scales-pass", o->kernels.a8_scales_on_load,
                "CUDA W8A8 q/k/v and dense gate/up (--linear-act): the products' raw sums as bf16, the scales applied "
                "by the per-head norms and the gated GELU as they read them, instead of f32 sums and a row-scaled "
                "pass (default on; --a8-scales-pass: the A/B)")
      ->check(switch_value());
  cmd->add_flag("--a8-row-codes,!--a8-quantise-apart", o->kernels.a8_row_codes,
                "CUDA W8A8 q/k/v, dense gate/up and down (--linear-act, with the scales on load): their inputs' E4M3 "
                "codes written by the norm or gated GELU that writes the input, instead of a launch of their own "
                "(default on; --a8-quantise-apart: the A/B, the same bytes)")
      ->check(switch_value());
  cmd->add_flag("--dense-stream,!--no-dense-stream", o->kernels.dense_stream,
                "CUDA bf16 linears of 65 rows and more through the streaming kernel in 128-row passes instead of "
                "cuBLAS (A/B, slower; default off)")
      ->check(switch_value());
  cmd->add_flag("--softcap-in-stats,!--softcap-pass", o->kernels.softcap_in_stats,
                "CUDA batched steps (--serve): the lm_head's softcap applied by the sampler's row statistics as they "
                "read the logits (the default; the same bits) or by a pass of its own (--softcap-pass, the A/B)")
      ->check(switch_value());
  cmd->add_flag("--single-softcap-in-stats,!--single-softcap-pass", o->kernels.softcap_in_stats_single,
                "CUDA single-sequence steps (as ask runs them): the softcap applied by the row statistics too, with "
                "--softcap-in-stats (the same bits; default off until measured)")
      ->check(switch_value());
  cmd->add_flag("--row-stats-groups,!--row-stats-each", o->kernels.row_stats_groups,
                "CUDA sampler statistics summed four entries at a time with four loads in flight (the default; the "
                "same argmax and tempered logits, entropies within about 1e-7) or entry by entry (--row-stats-each, "
                "the A/B)")
      ->check(switch_value());
  cmd->add_option("--soft-probs-loads", o->kernels.soft_probs_loads,
                  "CUDA self-conditioning probability passes: 16-byte loads each thread keeps in flight, 1 (the "
                  "default) or 4 (the same bits, measured slower: the A/B)")
      ->check(CLI::IsMember({1, 4}));
  cmd->add_option("--sc-survivors", o->kernels.sc_survivors,
                  "CUDA soft embedding with a survivor cutoff (--self-conditioning sparse): where every row of a "
                  "call has at most this many survivors, their bf16 embedding rows summed instead of the product "
                  "over the vocabulary (captured steps: a graph branch takes the product where a row overflows; "
                  "default 512; 0: off, the product always)")
      ->check(CLI::Range(0, kSurvivorCapMax));
  add_choice(cmd, "--a8-rows", o->kernels.a8_rows, kA8RowsModeNames,
             "CUDA W8A8 products of at most 256 rows (fp8 linears with --linear-act fp8, --vocab-act fp8; Hopper): "
             "cublaslt (default), own (our kernel, K split over a cluster, for the bf16 outputs: q/k/v, o, gate/up, "
             "down), all (also the f32 outputs: the vocabulary products, the self-conditioning down)");
  cmd->add_option("--moe-a8-stages", o->kernels.moe_a8_stages,
                  "CUDA W8A8 experts: pipeline stages of the streaming kernel, 3 | 4 (the 128-row passes of --moe wide "
                  "always run 3)")
      ->check(CLI::IsMember({3, 4}))
      ->capture_default_str();
  cmd->add_option_function<std::vector<int>>(
         "--moe-col-tiles",
         [o](const std::vector<int>& v) {
           o->kernels.moe_up_col_tiles = v[0];
           o->kernels.moe_down_col_tiles = v[1];
         },
         "CUDA experts in the streaming kernel (one stream, not --moe wide): column tiles each CTA streams as one "
         "pipeline, UP,DOWN for the gate/up and the down products, 1 to 8 each (more than 1: W8A8 and bf16 experts "
         "only); DOWN 0: 2 for W8A8 experts, 1 for the others (default 1,0)")
      ->delimiter(',')
      ->expected(2);
  cmd->add_option("--moe-q4-stages", o->kernels.moe_q4_stages,
                  "CUDA q4 experts (kernel layout): pipeline stages of the streaming kernel, 2 | 3 | 4")
      ->check(CLI::IsMember({2, 3, 4}))
      ->capture_default_str();
  cmd->add_option("--moe-q4-consumers", o->kernels.moe_q4_consumers,
                  "CUDA q4 experts (kernel layout) in the warp-specialised kernel (Hopper): consumer warpgroups, 2 | 4 "
                  "(four: one 64-row weight tile each; the same bits, measured slower: the A/B)")
      ->check(CLI::IsMember({2, 4}))
      ->capture_default_str();
  cmd->add_option("--moe-auto-rows", o->kernels.moe_auto_rows, "--moe auto: the token count from which wide runs (ws from twice as many on Hopper; cublas for experts wide "
                 "does not take)")
      ->check(positive_int())
      ->capture_default_str();
  cmd->add_option("--git-sha", o->git_sha, "commit recorded with every line (a copy of the tree without .git)")
      ->envname("DG_GIT_SHA");
  cmd->add_option("--profile-range", o->profile_range,
                  "CUDA: record only this part under a profiler started with --profile-from-start off (ncu): "
                  "prefill (the last --prefill length's timed pass) | denoise (one timed step per --context) | "
                  "serve-step (--serve: one timed batched step of the most streams)")
      ->check(CLI::IsMember({"prefill", "denoise", "serve-step"}));
  auto streams = std::make_shared<std::string>("1,4,8,16,32");
  cmd->add_flag("--serve", o->serve,
                "load benchmark: N concurrent requests through the batched generator at each N of --streams "
                "(--steps, --prompt-tokens; answers of --serve-tokens)");
  cmd->add_option("--streams", *streams, "--serve: concurrent request counts")
      ->check(positive_int_list())
      ->capture_default_str();
  cmd->add_option("--serve-tokens", o->serve_opt.gen_tokens, "--serve: tokens each request generates")
      ->check(positive_int())
      ->capture_default_str();
  cmd->add_option("--logit-rows", o->serve_opt.logit_rows, "--serve: lm_head rows per chunk")
      ->check(positive_int())
      ->capture_default_str();
  cmd->callback([o, prefill, context, streams] {
    // The synthetic full shape is a GPU benchmark: on the CPU the default is the embedded model.
    if (o->model.empty() && o->backend == "cpu" && o->layers == 0) o->model = embedded_model_dir();
    o->prefill = parse_list(*prefill);
    o->context = parse_list(*context);
    o->serve_opt.streams = parse_list(*streams);
    o->serve_opt.steps = o->steps;
    o->serve_opt.prompt_tokens = o->prompt_tokens;
    o->serve_opt.profile_step = o->profile_range == "serve-step";
    DG_CHECK(!o->serve_opt.profile_step || o->serve, "--profile-range serve-step profiles a --serve run's batched "
                                                     "step: add --serve");
    o->serve_opt.prefill_tokens = o->prefill_chunk;
    o->serve_opt.seed = o->seed;
    o->serve_opt.sc_cutoff = sc_cutoff(*o);
    DG_CHECK(o->peaked == 0 || o->model.empty(), "--peaked-vocab shapes a synthetic model's table, not the model "
                                                 "'{}': leave out -m", o->model);
    run_bench(*o);
  });
}

}  // namespace dg::cli
