// `diffgemma serve`: the OpenAI-compatible HTTP server (src/server/, docs/SERVER.md). Loopback by default;
// SIGINT / SIGTERM stop it cleanly (queued and running requests are answered 503, streams end).
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "backend/registry.h"
#include "cli/app.h"
#include "cli/option_checks.h"
#include "cli/sampler_options.h"
#include "core/error.h"
#include "serving/memory_plan.h"
#include "io/model_config.h"
#include "model/checkpoint.h"
#include "model/synthetic.h"
#include "model/weights.h"

#ifdef DG_WITH_SERVER
#include <pthread.h>

#include "server/server.h"
#endif

namespace dg::cli {
namespace {

#ifdef DG_WITH_SERVER
struct ServeCliOptions {
  ModelOptions model;
  server::ServerOptions server;
  std::string api_key_file;
  ToolCheckFlags tool_check;
  bool quiet = false;
  std::string warmup = "auto";  // auto | on | off (auto: on with the cuda backend)
  bool plan = false;         // print the memory plan and exit
  double device_gib = 0;     // --plan: the device's memory in all (0: this machine's)
  bool ctx_given = false;    // --ctx on the command line (the default is held to the model without a word)
};

// --ctx beyond what the model's positions allow is held to it, and the server says so once at start when the value
// was given (the listening line shows the context either way).
void hold_to_model(const ModelConfig& cfg, int64_t& context, bool given) {
  const int64_t held = server::held_context(cfg, context);
  if (held == context) return;
  if (given)
    fmt::print(stderr,
               "diffgemma serve: --ctx {} is beyond the model's {} positions (max_position_embeddings in config.json, "
               "a {}-token canvas after the answer): a request may use up to {} tokens, prompt and answer\n",
               context, cfg.max_positions, cfg.canvas, held);
  context = held;
}

// `serve --plan`: what a stream holds and what fits, for -m on --backend at --ctx, computed by the server's own
// plan (docs/SERVER.md, "Memory per stream") without loading the weights or starting anything.
void run_plan(const ServeCliOptions& o) {
  EngineOptions eo = engine_options(o.model);
  const Precision precision = engine_precision(eo);
  const StorageBytes bytes = backend_entry(eo.backend).bytes(precision);
  ModelConfig cfg;
  size_t weights = 0;
  if (const std::optional<std::string> profile = synthetic_profile(eo.model_dir)) {
    cfg = diffusiongemma_26b_config();
    weights = synthetic_weight_bytes(cfg, *profile, bytes.act);
  } else {
    const Checkpoint ck = Checkpoint::open(eo.model_dir);
    cfg = ck.config;
    weights = weight_bytes(ck.weights, bytes.weight);
  }
  server::ServerOptions so = o.server;
  hold_to_model(cfg, so.context, o.ctx_given);
  eo.context = so.context + cfg.canvas;
  MemoryInfo device = o.device_gib > 0 ? server::given_memory(o.device_gib)
                                       : make_backend(eo.backend, BackendOptions{precision})->memory_info();
  DG_CHECK(weights < device.free, "the weights ({}) do not fit in the {} free of {}", gib(weights), gib(device.free),
           gib(device.total));
  device.free -= weights;
  const MemoryInfo m = so.memory_gib > 0 ? server::given_memory(so.memory_gib) : device;
  const MemoryPlan p = plan_memory(cfg, server::memory_request(eo, precision, so), m);
  const StreamMemory& s = p.stream;
  const SharedMemory& sh = p.shared;
  fmt::print("model {} on {}, --ctx {} (sessions of {} tokens)\n", eo.model_dir, eo.backend, so.context, eo.context);
  fmt::print("weights      {}\n", gib(weights));
  fmt::print("memory       {} free of {}{}; {} kept as margin\n", gib(m.free), gib(m.total),
             so.memory_gib > 0 ? " (--memory)" : " beside the weights", gib(p.margin));
  fmt::print("a stream     {}: KV cache {}, self-conditioning {}, activations {}, canvas {}\n",
             gib(s.kv + s.working()), gib(s.kv), gib(s.tempered), gib(s.activations), gib(s.canvas));
  fmt::print("shared       {}: lm_head logits {}, prefill {}, soft embedding {}\n", gib(sh.total()), gib(sh.logits),
             gib(sh.prefill), gib(sh.soft_embed));
  fmt::print("--max-batch  {} with {} slots; {} would fit\n", p.max_batch, p.slots, p.fits);
}

// One key per line; blank lines and lines starting with '#' are skipped.
void read_api_keys(const std::string& path, std::vector<std::string>& keys) {
  std::ifstream in(path);
  DG_CHECK(in.good(), "cannot read --api-key-file '{}'", path);
  for (std::string line; std::getline(in, line);) {
    const size_t b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#') continue;
    keys.push_back(line.substr(b, e - b + 1));
  }
}

// --warmup: one block through the request path before the listener accepts (Server::warm_up); false when the
// server was stopped meanwhile.
bool warm_up(server::Server& srv, const std::string& backend) {
  fmt::print(stderr, "diffgemma serve: warming up ({}): one block ... ", backend);
  std::fflush(stderr);
  std::optional<double> seconds;
  try {
    seconds = srv.warm_up();
  } catch (...) {
    fmt::print(stderr, "failed (--warmup off skips it)\n");
    throw;
  }
  fmt::print(stderr, "{}\n", seconds ? fmt::format("done in {:.2f} s", *seconds) : std::string("stopped"));
  std::fflush(stderr);
  return seconds.has_value();
}

void run_serve(ServeCliOptions& o) {
  if (o.plan) {
    run_plan(o);
    return;
  }
  o.server.tool_check = o.tool_check.resolve();
  if (!o.api_key_file.empty()) read_api_keys(o.api_key_file, o.server.api_keys);
  std::erase(o.server.api_keys, std::string());  // `--api-key ""` (or an empty DG_API_KEY): no key
  // SIGINT and SIGTERM are taken by one thread (sigwait), so every other thread runs with them blocked; a write
  // to a closed socket must fail with EPIPE, not kill the process.
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  EngineOptions eo = engine_options(o.model);
  const ModelConfig config = synthetic_profile(o.model.model)
                                 ? diffusiongemma_26b_config()
                                 : load_model_config((std::filesystem::path(o.model.model) / "config.json").string());
  hold_to_model(config, o.server.context, o.ctx_given);
  eo.context = o.server.context + config.canvas;  // the last canvas attends past the answer budget
  const auto engine = EngineCore::open(eo);

  std::mutex log_mu;
  auto log = [&log_mu, quiet = o.quiet](const std::string& line) {
    if (quiet) return;
    std::lock_guard<std::mutex> lock(log_mu);
    fmt::print(stderr, "diffgemma serve: {}\n", line);
    std::fflush(stderr);
  };
  server::Server srv(*engine, o.server, log);
  const int port = srv.bind();
  const MemoryPlan& plan = srv.memory_plan();
  const AttnTopk& topk = engine->model().attention_topk();
  fmt::print(stderr, "diffgemma serve: --max-batch {}{}\n", plan.why,
             plan.max_batch == 1 ? " (one request at a time)" : "");
  std::thread([&srv, stop_signals] {  // before the warm-up, so that a stop signal ends it too
    int sig = 0;
    sigwait(&stop_signals, &sig);
    srv.stop();
  }).detach();
  const bool warm = o.warmup == "on" || (o.warmup == "auto" && eo.backend == "cuda");
  if (warm && !warm_up(srv, eo.backend)) {
    srv.run();  // returns at once, or once the stop that ended the warm-up is through
    fmt::print(stderr, "diffgemma serve: stopped\n");
    return;
  }
  fmt::print(stderr, "diffgemma serve: listening on http://{}:{} (model {}, context {}, {} sessions, queue {}{}{})\n",
             o.server.host, port, o.model.model, o.server.context, plan.slots, o.server.max_queue,
             topk.on() ? ", attention top-k " + attn_topk_name(topk) : "",
             o.server.api_keys.empty() ? "" : fmt::format(", {} API key(s) required", o.server.api_keys.size()));
  if (!srv.oplog_path().empty()) fmt::print(stderr, "diffgemma serve: op-log {}\n", srv.oplog_path());
  std::fflush(stderr);
  srv.run();
  fmt::print(stderr, "diffgemma serve: stopped\n");
}
#endif

}  // namespace

void register_serve(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (chat, completions, streaming, tools)");
#ifdef DG_WITH_SERVER
  auto o = std::make_shared<ServeCliOptions>();
  server::ServerOptions& s = o->server;
  add_model_options(cmd, o->model);
  cmd->add_option("--host", s.host, "IP address to listen on (or localhost; 0.0.0.0: every interface)")
      ->capture_default_str();
  cmd->add_option("--port", s.port, "port (0: any free port, printed at start)")
      ->check(port_number())
      ->capture_default_str();
  cmd->add_option("--api-key", s.api_keys,
                  "require 'Authorization: Bearer KEY' on every route but /health; repeat (or separate by commas) for "
                  "several keys, each a tenant of its own (no KV cache is shared between keys)")
      ->delimiter(',')
      ->envname("DG_API_KEY");
  cmd->add_option("--api-key-file", o->api_key_file,
                  "more API keys, one per line (a file keeps them off the command line)");
  cmd->add_flag("!--no-prefix-reuse", s.prefix_reuse,
                "no request reuses another request's KV cache (every prompt is encoded whole; no cached_tokens)");
  cmd->add_option("--ctx", s.context, "tokens one request may use (prompt + max_tokens)")
      ->check(positive_int())
      ->capture_default_str();
  cmd->add_option("--max-batch", s.max_batch,
                  "requests denoised together in one batched forward per step (0: as many as fit in memory, printed "
                  "at start; 1: one at a time; capped by --slots)")
      ->check(non_negative_int())
      ->capture_default_str();
  cmd->add_option("--memory", s.memory_gib,
                  "GiB the sessions and batches may fill beyond the loaded weights (0: what the backend reports free)")
      ->check(non_negative_finite())
      ->capture_default_str();
  cmd->add_option("--prefill-per-step", s.prefill_per_step,
                  "batched worker: prompt tokens encoded between two batched steps, the waiting prompts together in "
                  "turns (a prompt with at most an eighth of this left after its share takes the rest in the same "
                  "round)")
      ->check(positive_int())
      ->capture_default_str();
  cmd->add_option("--slots", s.slots,
                  "resident sessions (KV caches) a returning conversation can reuse (0: as many as --max-batch, at "
                  "least 4)")
      ->check(non_negative_int())
      ->capture_default_str();
  cmd->add_option("--max-queue", s.max_queue, "waiting requests beyond which new ones get 429")
      ->check(non_negative_int())
      ->capture_default_str();
  cmd->add_option("--timeout", s.timeout_s, "seconds a request may take, queueing included (then 504)")
      ->check(positive_finite())
      ->capture_default_str();
  cmd->add_option("--max-steps", s.max_steps,
                  "denoising steps per block one request may ask for (more: 400); with --max-tokens and --timeout "
                  "it bounds a request's work")
      ->check(positive_int())
      ->capture_default_str();
  cmd->add_option("--max-tokens", s.max_tokens, "answer tokens one request may ask for (more: 400; 0: the context)")
      ->check(non_negative_int())
      ->capture_default_str();
  cmd->add_option("--max-body", s.max_body_bytes, "largest request body in bytes (then 413)")
      ->check(positive_int())
      ->capture_default_str();
  cmd->add_option("--http-threads", s.http_threads, "HTTP worker threads (0: max-queue + 16)")
      ->check(non_negative_int())
      ->capture_default_str();
  // Hostile clients (docs/SERVER.md, "Security").
  cmd->add_option("--header-timeout", s.header_timeout_s,
                  "seconds a client has to send a whole request head (then 408); idle connections close after it")
      ->check(positive_finite())
      ->capture_default_str();
  cmd->add_option("--body-timeout", s.body_timeout_s, "seconds a client has to send a request body after its head")
      ->check(positive_finite())
      ->capture_default_str();
  cmd->add_option("--max-connections", s.max_connections,
                  "open connections in total; at the bound the one waiting longest for a request is closed")
      ->check(positive_int())
      ->capture_default_str();
  cmd->add_option("--max-connections-per-peer", s.max_connections_per_peer,
                  "open connections from one IP address (0: no bound; raise it behind a reverse proxy)")
      ->check(non_negative_int())
      ->capture_default_str();
  cmd->add_option("--allowed-hosts", s.allowed_hosts,
                  "host names (comma-separated) the Host header may carry besides IP addresses and localhost; "
                  "'*': any (behind a reverse proxy that checks it)")
      ->delimiter(',');
  cmd->add_option("--log-dir", s.log_dir,
                  "write an op-log (JSONL of engine ops with token ids: the conversations) here, readable by this "
                  "user only; see replay");
  cmd->add_flag("!--log-without-content", s.log_content,
                "with --log-dir: log token counts instead of token ids (no conversation text; cannot be replayed)");
  cmd->add_option("--model-id", s.model_id, "the model id /v1/models lists (default: the directory's name)");
  cmd->add_flag("--allow-special-literals", s.allow_special_literals,
                "accept chat text holding special-token literals such as <|turn> (encoded as plain text) instead "
                "of answering 400");
  o->tool_check.add_to(cmd);  // the default of a request's tool_check and tool_attempts
  cmd->add_flag("!--no-tool-continuation", s.tool_continuation,
                "a request that continues a tool turn is prompted with the conversation re-rendered instead of the "
                "turn's raw token log (docs/TOOLS.md)");
  cmd->add_flag("-q,--quiet", o->quiet, "no per-request log lines on stderr");
  cmd->add_option("--warmup", o->warmup,
                  "before it accepts requests, run one short chat request (a one-block answer) through the path "
                  "requests take, so that no client pays the device's first-use costs; nothing of it stays behind "
                  "(auto: on with --backend cuda, off on the cpu)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  cmd->add_flag("--plan", o->plan,
                "print what one stream holds and how many fit (-m, --backend, --ctx, --max-batch, --slots, --memory) "
                "without loading the weights, and exit; -m may be " +
                    synthetic_model_pattern());
  cmd->add_option("--device-memory", o->device_gib,
                  "with --plan: the device's GiB in all, the weights' share included (default: this machine's "
                  "device, which --backend cuda then needs)")
      ->check(non_negative_finite());
  cmd->callback([o, cmd] {
    o->ctx_given = cmd->count("--ctx") > 0;
    run_serve(*o);
  });
#else
  cmd->allow_extras();
  cmd->callback([] { fail("this diffgemma was built without the server (configure with -DDG_SERVER=ON)"); });
#endif
}

}  // namespace dg::cli
