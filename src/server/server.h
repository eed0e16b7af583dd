// dg::server::Server: the OpenAI-compatible HTTP front of one EngineCore. HTTP handler threads (server/http.h) parse and
// validate requests, render prompts to token ids, push jobs to a bounded queue (429 when full) and stream the
// job's events back; one device worker (src/serving/worker.h) owns the model and the KV caches. Routes:
// POST /v1/chat/completions, POST /v1/completions, POST /v1/responses, GET /v1/models[/ID], GET /health,
// GET /metrics (docs/SERVER.md).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "engine/engine_core.h"
#include "serving/memory_plan.h"
#include "engine/oplog.h"
#include "serving/scheduler.h"
#include "serving/stats.h"
#include "serving/worker.h"
#include "server/http.h"
#include "server/metrics.h"
#include "server/options.h"
#include "server/wire_request.h"
#include "server/wire_response.h"

namespace dg::server {

// What the server's memory plan is asked (docs/SERVER.md, "Memory per stream"): the engine's context, ring slack
// and prefill chunk, the storage sizes of its backend at `precision`, the batch and slots asked for. Throws
// dg::Error for negative options.
MemoryRequest memory_request(const EngineOptions& eo, const Precision& precision, const ServerOptions& opt);
MemoryInfo given_memory(double gib);  // --memory GIB: that much free, of as much in all
// The tokens (prompt + answer) one request may use: `context` (--ctx), held to what the model's positions allow (a
// prompt of p tokens and an answer of a take positions up to p + a - 1 + canvas, so p + a <= max_positions - canvas
// + 1); a config without max_position_embeddings holds nothing back.
int64_t held_context(const ModelConfig& cfg, int64_t context);
// The chat request the warm-up sends (Server::warm_up): one short user turn at a fixed seed, the server's defaults
// for the rest.
Json warm_up_body();

class Server {
 public:
  using Log = std::function<void(const std::string&)>;
  // Opens the op-log (when opt.log_dir is set) and prepares the routes; throws dg::Error without a Gemma 4 chat
  // tokenizer in the model directory.
  // `denoiser`: nullptr for the model itself (tests script replies with one).
  Server(const EngineCore& engine, ServerOptions opt, Log log = nullptr, DenoiserFactory denoiser = nullptr);
  ~Server();

  int bind();   // binds host:port (port 0: a free one) and returns the port; throws dg::Error when it cannot
  // Before the listener accepts (docs/SERVER.md, "Warm-up"): starts the worker and runs warm_up_body(), its answer
  // held to one block, through it as a request runs, so that no client pays the device's first-use costs; nothing
  // of it stays behind (Worker::warm_up). Returns the seconds it took; nullopt when the server was stopped
  // meanwhile; throws dg::Error when the generation failed.
  std::optional<double> warm_up();
  void run();   // starts the worker and serves until stop()
  // From any thread: queued and running jobs are answered 503, streams end, run() returns once the stop is through
  // (the server may then be destroyed at once); a second stop() waits for the first.
  void stop();
  std::string oplog_path() const { return oplog_ ? oplog_->path() : std::string(); }
  // The batch and the slots the server chose (or was given) and the memory behind them.
  const MemoryPlan& memory_plan() const { return plan_; }
  // The tokens one request may use: --ctx held to the model's positions (held_context).
  int64_t context() const { return opt_.context; }

 private:
  HttpHandlers handlers();
  // Answers on the network thread what needs no waiting (health, models, metrics, refusals); false: `slow`.
  bool quick(const HttpRequest& req, HttpResponse& res);
  void slow(const HttpRequest& req, HttpResponse& res);
  int key_of(const HttpRequest& req) const;  // the index of the API key the request carries; -1: none of them
  // Whose KV cache a request may reuse: its API key and its `user`, or only itself without prefix reuse.
  std::string tenant_of(const HttpRequest& req, const std::string& user, uint64_t job) const;
  enum class Api : uint8_t { kChat, kCompletion, kResponses };
  // How a job's answer goes out: which API, its id, the request (echoed by a response object), the request's
  // fields this server does not use (reported, never silently ignored).
  struct Answer {
    Api api = Api::kChat;
    ResponseMeta meta;
    Json request;
    bool include_usage = false;
    Json ignored = Json::array();
  };
  void handle_generate(const HttpRequest& req, HttpResponse& res, Api api);
  // The JSON answer once the job is done; a client that hangs up meanwhile cancels the job (answered 499).
  void wait_for_answer(const HttpRequest& req, HttpResponse& res, const std::shared_ptr<Job>& job, const Answer& a);
  void stream_answer(HttpResponse& res, const std::shared_ptr<Job>& job, const Answer& a);
  void say(const std::string& line) const;

  const EngineCore& engine_;
  ServerOptions opt_;
  MemoryPlan plan_;
  Log log_;
  ChatTokens chat_tokens_;
  WireContext wire_;
  std::unique_ptr<OpLog> oplog_;
  WorkerStats worker_stats_;
  HttpStats http_stats_;
  JobQueue queue_;
  std::unique_ptr<Worker> worker_;
  std::unique_ptr<HttpServer> http_;
  std::atomic<uint64_t> next_job_{1};
  std::mutex stop_mu_;  // one stop() at a time; run() returns once it is through
  std::atomic<bool> stopping_{false};
  std::string id_prefix_;  // 64 random bits per process: response and call ids do not repeat across restarts
  int64_t started_ = 0;
};

}  // namespace dg::server
