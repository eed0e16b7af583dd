// The device worker: one thread owns the model and every KV cache (the SessionPool); HTTP threads only push
// jobs (token ids) to the JobQueue and read events from each job's channel. This worker runs one job at a time
// to its end, in arrival order, and asks between denoise steps whether to stop (client gone, deadline passed,
// a stop string matched, shutdown). A batched worker keeps this surface: it takes up to max_batch jobs from the
// same queue, routes each to a free slot, and denoises their canvases in one forward per step (docs/SERVER.md).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "chat/chat_tokens.h"
#include "dg/engine.h"
#include "engine/oplog.h"
#include "engine/scheduler.h"
#include "engine/session_pool.h"
#include "engine/stats.h"

namespace dg {

// What denoises a job's canvases: nullptr for the model itself; tests script replies with it.
using DenoiserFactory = std::function<std::unique_ptr<Denoiser>(const Model& model, const Job& job)>;

struct WorkerOptions {
  int slots = 4;       // sessions kept resident: conversations whose KV a later request can reuse
  int max_batch = 1;   // jobs in flight at once (this worker: 1)
  SessionOptions session;
  OpLog* oplog = nullptr;                          // every engine op, when set
  std::function<void(const std::string&)> log;     // one line per decision: routing, cancels, errors
  DenoiserFactory denoiser;
};

class Worker {
 public:
  Worker(const Engine& engine, JobQueue& queue, WorkerStats& stats, WorkerOptions opt);
  ~Worker();  // stop() and join

  void start();
  // Ends the worker: the running job is cancelled at its next step and answered with a 503, so is every job
  // still queued (the queue is closed).
  void stop();

 private:
  void loop();
  void run(Job& job);
  void say(const std::string& line) const;

  const Engine& engine_;
  JobQueue& queue_;
  WorkerStats& stats_;
  WorkerOptions opt_;
  ChatTokens chat_tokens_;
  SessionPool pool_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// Runs one job on one session (src/engine/job_run.cpp): the chat turn or raw completion, its events, its op-log
// records. `stop` is asked before every denoise step; the caller maps why it stopped.
struct JobContext {
  const Engine& engine;
  const ChatTokens& chat_tokens;
  WorkerStats& stats;
  OpLog* oplog = nullptr;
  std::function<bool()> stop;
  Denoiser* denoiser = nullptr;  // nullptr: the session's model
};
void run_chat_job(Job& job, Session& session, int slot, const JobContext& ctx);
void run_completion_job(Job& job, Session& session, int slot, const JobContext& ctx);

}  // namespace dg
