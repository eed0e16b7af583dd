#include "server/server.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <random>
#include <thread>

#include "backend/registry.h"
#include "core/error.h"
#include "diffusion/batch.h"

namespace dg::server {
namespace {

std::string default_model_id(const EngineCore& engine) {
  const std::string name = std::filesystem::path(engine.checkpoint().dir).lexically_normal().filename().string();
  return name.empty() || name == "." ? std::string("diffgemma") : name;
}

std::string open_oplog_path(const std::string& dir) {
  create_private_dirs(dir);
  return (std::filesystem::path(dir) / fmt::format("ops-{}-{}.jsonl", std::time(nullptr), ::getpid())).string();
}

// --ctx held to the model's positions (held_context).
ServerOptions within_model(const EngineCore& engine, ServerOptions opt) {
  opt.context = held_context(engine.config(), opt.context);
  return opt;
}

// The batch and slots from the backend's free memory (or --memory), docs/SERVER.md "Memory per stream".
MemoryPlan plan_server_memory(const EngineCore& engine, const ServerOptions& opt) {
  const MemoryInfo m = opt.memory_gib > 0 ? given_memory(opt.memory_gib) : engine.backend().memory_info();
  return plan_memory(engine.config(), memory_request(engine.options(), engine.backend().precision(), opt), m);
}

}  // namespace

MemoryRequest memory_request(const EngineOptions& eo, const Precision& precision, const ServerOptions& opt) {
  DG_CHECK(opt.max_batch >= 0, "--max-batch must be at least 1, or 0 for what fits (got {})", opt.max_batch);
  DG_CHECK(opt.slots >= 0, "--slots must be at least 1, or 0 for as many as the batch (got {})", opt.slots);
  DG_CHECK(opt.memory_gib >= 0, "--memory must be positive, or 0 for what the backend reports (got {})",
           opt.memory_gib);
  const BackendEntry& be = backend_entry(eo.backend);
  MemoryRequest r;
  r.context = eo.context;
  r.ring_slack = std::max(WorkerOptions{}.session.ring_slack, eo.kv_ring_slack);  // as EngineCore::open_session
  // a prompt encode: serial, or a round's
  r.prefill_rows = std::max(eo.prefill_chunk, prefill_round_limit(opt.prefill_per_step));
  r.bytes = be.bytes(precision);
  r.max_batch = opt.max_batch;
  r.slots = opt.slots;
  r.cap = be.batch_cap;
  return r;
}

int64_t held_context(const ModelConfig& cfg, int64_t context) {
  if (cfg.max_positions <= 0) return context;
  return std::min<int64_t>(context, cfg.max_positions - cfg.canvas + 1);
}

MemoryInfo given_memory(double gib) {
  const auto b = static_cast<size_t>(gib * static_cast<double>(size_t{1} << 30));
  return MemoryInfo{b, b};
}

Server::Server(const EngineCore& engine, ServerOptions opt, Log log, DenoiserFactory denoiser)
    : engine_(engine), opt_(within_model(engine, std::move(opt))), plan_(plan_server_memory(engine, opt_)), log_(std::move(log)),
      chat_tokens_(ChatTokens::from(engine.tokenizer())),
      wire_{engine.tokenizer(), chat_tokens_, engine.default_sampler(SamplerProfile::kContract),
            engine.default_sampler(SamplerProfile::kReference), opt_.context, opt_.allow_special_literals,
            chat_json_vocab(engine.tokenizer(), chat_tokens_, engine.default_sampler(SamplerProfile::kContract).stop_ids)},
      worker_stats_(plan_.max_batch), queue_(opt_.max_queue) {
  DG_CHECK(opt_.context > 0, "--ctx must be positive (got {})", opt_.context);
  opt_.max_batch = plan_.max_batch;
  opt_.slots = plan_.slots;
  DG_CHECK(opt_.prefill_per_step >= 1, "--prefill-per-step must be at least 1 (got {})", opt_.prefill_per_step);
  DG_CHECK(opt_.max_queue >= 1, "--max-queue must be at least 1");
  DG_CHECK(opt_.timeout_s > 0, "--timeout must be positive");
  for (const std::string& key : opt_.api_keys) DG_CHECK(!key.empty(), "an API key must not be empty");
  DG_CHECK(opt_.max_tokens >= 0, "--max-tokens must be 0 (the context) or positive (got {})", opt_.max_tokens);
  for (const SamplerOptions* d : {&wire_.contract, &wire_.reference})
    DG_CHECK(d->steps <= opt_.max_steps, "--max-steps {} is below the model's default of {} steps per block",
             opt_.max_steps, d->steps);
  wire_.tool_check = opt_.tool_check;
  wire_.call_vocab = chat_call_vocab(engine.tokenizer(), chat_tokens_, wire_.contract.stop_ids);
  wire_.max_steps = opt_.max_steps;
  wire_.max_tokens = opt_.max_tokens;
  if (opt_.model_id.empty()) opt_.model_id = default_model_id(engine);
  std::random_device rd;
  id_prefix_ = fmt::format("{:08x}{:08x}", rd(), rd());
  started_ = static_cast<int64_t>(std::time(nullptr));

  WorkerOptions wo;
  wo.slots = opt_.slots;
  wo.max_batch = opt_.max_batch;
  wo.prefill_chunk = opt_.prefill_per_step;
  wo.context = opt_.context;
  wo.tool_continuation = opt_.tool_continuation;
  wo.log = [this](const std::string& line) { say(line); };
  wo.denoiser = std::move(denoiser);
  if (!opt_.log_dir.empty()) {
    oplog_ = std::make_unique<OpLog>(open_oplog_path(opt_.log_dir), opt_.log_content);
    wo.oplog = oplog_.get();
    oplog_->write(oplog_open_record(engine, wo.slots, wo.session.ring_slack, opt_.log_content));
  }
  worker_ = std::make_unique<Worker>(engine_, queue_, worker_stats_, wo);

  HttpLimits limits;
  limits.max_body = opt_.max_body_bytes;
  limits.header_timeout_s = opt_.header_timeout_s;
  limits.body_timeout_s = opt_.body_timeout_s;
  limits.max_connections = opt_.max_connections;
  limits.max_connections_per_peer = opt_.max_connections_per_peer;
  limits.handler_threads = opt_.http_threads > 0 ? opt_.http_threads : static_cast<int>(opt_.max_queue) + 16;
  http_ = std::make_unique<HttpServer>(limits, handlers());
}

Server::~Server() { stop(); }

void Server::say(const std::string& line) const {
  if (log_) log_(line);
}

int Server::bind() { return http_->bind(opt_.host, opt_.port); }

void Server::run() {
  worker_->start();
  http_->run();
  // A stop from another thread ends the network loop before it returns itself: wait until it is through, so that
  // the caller may destroy the server at once.
  std::lock_guard<std::mutex> lock(stop_mu_);
}

void Server::stop() {
  std::lock_guard<std::mutex> lock(stop_mu_);
  stopping_ = true;
  worker_->stop();  // queued and running jobs are answered 503 ...
  http_->stop();    // ... and those answers go out before the connections close
}

}  // namespace dg::server
