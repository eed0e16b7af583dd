// The device worker: one thread owns the model and every KV cache (the SessionPool); HTTP threads only push
// jobs (token ids) to the JobQueue and read events from each job's channel. With max_batch 1 (or scripted
// denoisers) it runs one job at a time to its end, in arrival order. With max_batch > 1 it keeps up to
// min(max_batch, slots) jobs in flight and denoises their canvases in one batched forward per step (continuous
// batching, src/serving/worker_batch.cpp): each job's host logic runs on its own thread, one at a time, and every
// model call it makes (prompt and block encodes, denoise steps with their draws) is executed by the worker thread;
// the encodes of a round share one encoder pass, prompts within a budget taken in turns. Between steps it
// asks whether to stop (client gone, deadline passed, a stop string matched, shutdown); docs/SERVER.md.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "chat/chat_tokens.h"
#include "engine/engine_core.h"
#include "diffusion/batch.h"
#include "engine/oplog.h"
#include "serving/scheduler.h"
#include "serving/session_pool.h"
#include "serving/stats.h"

namespace dg {

// Pushes the job's kError event; `code` when the status's own does not say it.
void answer_error(Job& job, int status, std::string message, std::string code = "");

// What denoises a job's canvases: nullptr for the model itself; tests script replies with it.
using DenoiserFactory = std::function<std::unique_ptr<Denoiser>(const Model& model, const Job& job)>;

struct WorkerOptions {
  int slots = 4;       // sessions kept resident: conversations whose KV a later request can reuse
  int max_batch = 1;   // jobs denoised together (capped by slots; 1: one job at a time)
  int64_t prefill_chunk = 1024;  // batched worker: prompt tokens encoded per round, all prompts together
  int64_t context = 0;  // prompt + answer tokens one request may use (a tool-turn continuation must fit; 0: no bound)
  // A request that continues a slot's tool turn is prompted with the turn's raw token log (chat/tool_turn.h).
  bool tool_continuation = true;
  SessionOptions session;
  OpLog* oplog = nullptr;                          // every engine op, when set
  std::function<void(const std::string&)> log;     // one line per decision: routing, cancels, errors
  DenoiserFactory denoiser;
};

class Worker {
 public:
  Worker(const EngineCore& engine, JobQueue& queue, WorkerStats& stats, WorkerOptions opt);
  ~Worker();  // stop() and join

  void start();  // starts the worker thread, unless it runs already or the worker was stopped
  // Ends the worker: the running job is cancelled at its next step and answered with a 503, so is every job
  // still queued (the queue is closed).
  void stop();
  // Runs `job`, which no client sent, through the queue and the path every request takes (serial or batched), and
  // blocks until it is answered and leaves no trace: its slot is as at start again (cache cleared, no tenant), it
  // writes no op-log record and no routing line, and the stats it added are reset. Call after start() and before
  // anything else is queued (docs/SERVER.md, "Warm-up"). Returns its last event (kDone, or kError: a 503 when the
  // worker stopped meanwhile).
  JobEvent warm_up(std::shared_ptr<Job> job);

 private:
  class Flight;
  bool batched() const { return opt_.max_batch > 1 && !opt_.denoiser; }
  void loop();
  void loop_batched();
  // A round's committed blocks held for its denoise forward (BatchDenoiser::fuses_encodes): their ids, copied, and
  // their jobs.
  struct HeldEncode {
    std::vector<std::vector<int32_t>> ids;
    std::vector<EncodeSeq> seqs;
    std::vector<Flight*> blocks;
  };
  // held: null encodes the committed blocks in the pass; otherwise they are left in *held and their jobs get their
  // turn at once. Prompt tokens are encoded in the pass either way.
  void encode_round(BatchDenoiser& bd, PrefillRotation& rotation, std::span<Flight* const> encoding,
                    HeldEncode* held = nullptr);
  bool refuse(Job& job);  // answers a job that must not run (shutdown, cancelled or expired in the queue)
  void run(Job& job);
  // Routes and acquires a session slot: the slot whose tool turn the job continues (its prompt becomes that
  // turn's raw log), else SessionPool::route.
  int open_slot(Job& job);
  bool continue_turn(Job& job, const ToolTurn& turn) const;  // sets the job's prompt when it continues `turn`
  void close_slot(const Job& job, int slot);
  bool warming(const Job& job) const { return &job == warm_job_.load(); }
  OpLog* oplog_of(const Job& job) const { return warming(job) ? nullptr : opt_.oplog; }
  void end_warm_up();  // the warm-up job is answered and its traces are gone: warm_up() returns
  void run_on(Job& job, int slot, Denoiser* denoiser, bool worker_times_steps);
  void say(const std::string& line) const;

  const EngineCore& engine_;
  JobQueue& queue_;
  WorkerStats& stats_;
  WorkerOptions opt_;
  ChatTokens chat_tokens_;
  SessionPool pool_;
  std::atomic<bool> stopping_{false};
  std::mutex thread_mu_;  // start() and stop() may come from different threads
  std::thread thread_;
  std::atomic<const Job*> warm_job_{nullptr};
  std::mutex warm_mu_;
  std::condition_variable warm_cv_;
  bool warm_ended_ = false;
};

// Runs one job on one session (src/serving/job_run.cpp): the chat turn or raw completion, its events, its op-log
// records. `stop` is asked before every denoise step; the caller maps why it stopped.
struct JobContext {
  const EngineCore& engine;
  const ChatTokens& chat_tokens;
  WorkerStats& stats;
  OpLog* oplog = nullptr;
  std::function<bool()> stop;
  Denoiser* denoiser = nullptr;  // nullptr: the session's model
  bool worker_times_steps = false;  // the batched worker records step latency and occupancy per batched step
  bool tool_continuation = true;    // keep a tool-calling reply's raw turn in the cache (WorkerOptions)
};
// A chat job; returns the tool turn the slot's cache now ends in (a reply that called tools), else nullopt.
std::optional<ToolTurn> run_chat_job(Job& job, Session& session, int slot, const JobContext& ctx);
void run_completion_job(Job& job, Session& session, int slot, const JobContext& ctx);

}  // namespace dg
