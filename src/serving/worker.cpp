#include "serving/worker.h"

#include <algorithm>
#include <chrono>
#include <new>

#include <fmt/format.h>

#include "core/error.h"

namespace dg {

Worker::Worker(const EngineCore& engine, JobQueue& queue, WorkerStats& stats, WorkerOptions opt)
    : engine_(engine), queue_(queue), stats_(stats), opt_(std::move(opt)),
      chat_tokens_(ChatTokens::from(engine.tokenizer())), pool_(engine, opt_.slots, opt_.session) {}

Worker::~Worker() { stop(); }

void Worker::start() {
  std::lock_guard<std::mutex> lock(thread_mu_);
  if (stopping_ || thread_.joinable()) return;
  thread_ = std::thread([this] { loop(); });
}

void Worker::stop() {
  stopping_ = true;
  queue_.close();
  std::lock_guard<std::mutex> lock(thread_mu_);
  if (thread_.joinable()) thread_.join();
}

JobEvent Worker::warm_up(std::shared_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(warm_mu_);
    warm_ended_ = false;
  }
  warm_job_ = job.get();
  if (!queue_.push(job)) {
    warm_job_ = nullptr;
    JobEvent e;
    e.kind = JobEvent::Kind::kError;
    e.status = 503;
    e.text = "the server is shutting down";
    return e;
  }
  std::unique_lock<std::mutex> lock(warm_mu_);
  warm_cv_.wait(lock, [&] { return warm_ended_; });
  // Every event was pushed before the end: the last one is the answer.
  JobEvent last;
  while (std::optional<JobEvent> e = job->events.pop(std::chrono::milliseconds(0))) last = std::move(*e);
  return last;
}

void Worker::end_warm_up() {
  stats_.reset();
  warm_job_ = nullptr;
  std::lock_guard<std::mutex> lock(warm_mu_);
  warm_ended_ = true;
  warm_cv_.notify_all();
}

void Worker::say(const std::string& line) const {
  if (opt_.log) opt_.log(line);
}

void answer_error(Job& job, int status, std::string message, std::string code) {
  JobEvent e;
  e.kind = JobEvent::Kind::kError;
  e.status = status;
  e.text = std::move(message);
  e.code = std::move(code);
  job.events.push(std::move(e));
}

bool Worker::refuse(Job& job) {
  if (stopping_) {
    answer_error(job, 503, "the server is shutting down");
  } else if (job.cancelled) {
    ++stats_.jobs_cancelled;
    answer_error(job, 499, "the client closed the connection while the request was queued");
  } else if (job.expired()) {
    ++stats_.jobs_timed_out;
    answer_error(job, 504, "the request timed out while queued");
    say(fmt::format("job {}: timed out in the queue", job.id));
  } else {
    return false;
  }
  if (warming(job)) end_warm_up();
  return true;
}

void Worker::loop() {
  if (batched()) {
    loop_batched();
    return;
  }
  while (std::shared_ptr<Job> job = queue_.pop())
    if (!refuse(*job)) run(*job);
}

bool Worker::continue_turn(Job& job, const ToolTurn& turn) const {
  JobSpec& spec = job.spec;
  std::optional<RenderedPrompt> p =
      continue_tool_turn(turn, spec.conversation, spec.render, engine_.tokenizer(), chat_tokens_);
  if (!p) return false;
  // The raw log holds the reasoning the canonical render drops, so it is longer than the prompt the request was
  // checked with: a budget the request set must still fit; the default one (the rest of the context) shrinks.
  const auto n = static_cast<int64_t>(p->ids.size());
  if (opt_.context > 0) {
    if (n >= opt_.context) return false;
    if (spec.max_tokens_given && n + spec.sampler.max_new_tokens > opt_.context) return false;
    if (!spec.max_tokens_given)
      spec.sampler.max_new_tokens = static_cast<int>(std::min<int64_t>(spec.sampler.max_new_tokens, opt_.context - n));
  }
  spec.prompt = std::move(p->ids);
  spec.prompt_end = p->end;
  return true;
}

int Worker::open_slot(Job& job) {
  Route r;
  if (opt_.tool_continuation && job.spec.kind == JobSpec::Kind::kChat)
    r.slot = pool_.tool_turn_slot(job.spec.tenant, [&](const ToolTurn& t) { return continue_turn(job, t); });
  if (r.slot >= 0) {
    r.why = "tool_turn";
    r.held = pool_.session(r.slot).size();
    r.common = common_prefix(pool_.session(r.slot).tokens(), job.spec.prompt);
  } else {
    r = pool_.route(job.spec.prompt, job.spec.tenant);
  }
  DG_CHECK(r.slot >= 0, "no free session slot (the worker holds at most one job per slot)");
  if (!warming(job))
    say(fmt::format("job {}: slot {} ({}{}): reuses {} of {} prompt tokens; the slot held {}", job.id, r.slot, r.why,
                    r.clear ? ", another tenant's: cleared" : "", r.common, job.spec.prompt.size(), r.held));
  OpLog* oplog = oplog_of(job);
  if (oplog != nullptr)
    oplog->write({{"op", "route"}, {"job", job.id}, {"slot", r.slot}, {"why", r.why}, {"common", r.common},
                  {"held", r.held}, {"prompt", job.spec.prompt.size()},
                  {"queued", std::chrono::duration<double>(Clock::now() - job.enqueued).count()}});
  if (r.clear) {
    pool_.session(r.slot).clear();
    if (oplog != nullptr) oplog->write({{"op", "clear"}, {"job", job.id}, {"slot", r.slot}});
  }
  pool_.acquire(r.slot, job.spec.tenant);
  ++stats_.running;
  return r.slot;
}

void Worker::close_slot(const Job& job, int slot) {
  --stats_.running;
  pool_.release(slot);
  if (!warming(job)) return;
  pool_.reset(slot);
  end_warm_up();
}

void Worker::run_on(Job& job, int slot, Denoiser* denoiser, bool worker_times_steps) {
  Session& session = pool_.session(slot);
  OpLog* oplog = oplog_of(job);
  JobContext ctx{engine_, chat_tokens_, stats_, oplog,
                 [&] { return stopping_.load() || job.cancelled.load() || job.expired(); }, denoiser};
  ctx.worker_times_steps = worker_times_steps;
  ctx.tool_continuation = opt_.tool_continuation;
  try {
    if (job.spec.kind == JobSpec::Kind::kChat)
      pool_.set_tool_turn(slot, run_chat_job(job, session, slot, ctx));
    else
      run_completion_job(job, session, slot, ctx);
  } catch (const std::exception& e) {
    ++stats_.jobs_failed;
    session.clear();  // the cache may hold half an op: start the slot over
    if (oplog != nullptr) oplog->write({{"op", "clear"}, {"job", job.id}, {"slot", slot}});
    // Memory ran out under this load (the plan at start keeps it from happening; docs/SERVER.md): the client may
    // retry, as after a 503 at admission. Anything else is the engine's fault.
    const bool oom = dynamic_cast<const OutOfMemory*>(&e) != nullptr || dynamic_cast<const std::bad_alloc*>(&e) != nullptr;
    say(fmt::format("job {}: {}: {}", job.id, oom ? "out of memory" : "engine error", e.what()));
    if (oom)
      answer_error(job, 503, fmt::format("the server ran out of memory for this request ({}); retry later", e.what()),
                   "out_of_memory");
    else
      answer_error(job, 500, fmt::format("engine error: {}", e.what()));
  }
}

void Worker::run(Job& job) {
  const int slot = open_slot(job);
  const std::unique_ptr<Denoiser> denoiser = opt_.denoiser ? opt_.denoiser(engine_.model(), job) : nullptr;
  run_on(job, slot, denoiser.get(), false);
  close_slot(job, slot);
}

}  // namespace dg
