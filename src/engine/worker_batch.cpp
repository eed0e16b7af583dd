// The batched worker loop. Each job in flight runs its host logic (chat rendering, reply parsing, stop strings,
// events, op-log) on a thread of its own, but only while it holds the turn: the worker hands the turn to one job
// at a time, and every model call the job makes is executed by the worker thread on the job's behalf. A turn ends
// when the job asks for a denoise step (it joins this round's batch) or a committed block's encode (batched with
// the other jobs' blocks), yields between prefill chunks, or finishes. A round: admit queued jobs, give each ready
// job its turn, encode the committed blocks, run one batched forward over every waiting canvas.
#include <chrono>
#include <condition_variable>
#include <exception>
#include <list>
#include <mutex>

#include <fmt/format.h>

#include "core/error.h"
#include "diffusion/batch.h"
#include "engine/worker.h"

namespace dg {

class Worker::Flight final : public Denoiser {
 public:
  enum class State : uint8_t { kReady, kTurn, kCall, kYield, kEncode, kDenoise, kDone };

  Flight(Worker& w, std::shared_ptr<Job> job, int slot, BatchDenoiser& bd)
      : w_(w), job_(std::move(job)), slot_(slot), bd_(bd), seq_(bd.open()) {}
  ~Flight() override { bd_.close(seq_); }

  void start() { thread_ = std::thread([this] { body(); }); }
  void join() { thread_.join(); }
  State state() {
    std::lock_guard<std::mutex> lock(mu_);
    return state_;
  }
  int slot() const { return slot_; }
  Job& job() { return *job_; }

  // Worker side: hands the turn over and serves the job's model calls until the turn ends.
  void turn() {
    std::unique_lock<std::mutex> lock(mu_);
    state_ = State::kTurn;
    cv_.notify_all();
    for (;;) {
      cv_.wait(lock, [&] { return state_ != State::kTurn; });
      if (state_ != State::kCall) return;
      lock.unlock();
      try {
        call_();
      } catch (...) {
        error_ = std::current_exception();
      }
      lock.lock();
      state_ = State::kTurn;
      cv_.notify_all();
    }
  }
  // Worker side: this job's canvas in the batched step, and what to do with the results.
  BatchItem item() {
    StepRequest r{canvas_, kind_, temperature_, cutoff_, u_};
    return BatchItem{seq_, kv_, r, stats_, drawn_, keep_rows_};
  }
  void stepped(std::exception_ptr error) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::move(error);
    state_ = State::kReady;
  }

  // Job side: the Denoiser the job's generation runs on.
  int canvas() const override { return w_.engine_.model().config().canvas; }
  int64_t vocab() const override { return w_.engine_.model().config().vocab; }
  int64_t max_positions() const override { return w_.engine_.model().config().max_positions; }
  // Committed blocks: encoded together with the other jobs' blocks of this round.
  void encode(KvCache& kv, std::span<const int32_t> ids) override {
    if (ids.empty()) return;
    block_ = EncodeSeq{&kv, ids};
    post(State::kEncode);
  }
  EncodeSeq block() const { return block_; }
  // Prompts (the session's sync): in chunks, one per round.
  void encode_prompt(KvCache& kv, std::span<const int32_t> ids) {
    const auto chunk = static_cast<size_t>(w_.opt_.prefill_chunk);
    for (size_t at = 0; at < ids.size(); at += chunk) {
      const std::span<const int32_t> part = ids.subspan(at, std::min(chunk, ids.size() - at));
      call([&] { w_.engine_.model().encode(kv, part); });
      if (at + chunk < ids.size()) post(State::kYield);  // running canvases step before the next chunk
    }
  }
  void denoise(const KvCache& kv, std::span<const int32_t> canvas, ScKind kind, float sparse_cutoff,
               float temperature, RowStats* stats) override {
    denoise_draw(kv, canvas, kind, sparse_cutoff, temperature, stats, {}, nullptr);
  }
  // Categorical steps draw inside the batched step (their uniforms come with the request).
  void denoise_draw(const KvCache& kv, std::span<const int32_t> canvas, ScKind kind, float sparse_cutoff,
                    float temperature, RowStats* stats, std::span<const double> u, int32_t* drawn) override {
    kv_ = &kv;
    canvas_.assign(canvas.begin(), canvas.end());
    kind_ = kind;
    cutoff_ = sparse_cutoff;
    temperature_ = temperature;
    stats_ = stats;
    u_ = u;
    drawn_ = drawn;
    post(State::kDenoise);
  }
  void draw(std::span<const double>, int32_t*) override {
    fail("the batched worker draws inside the denoise step (denoise_draw)");
  }
  void row_logits(int row, std::vector<float>& out) override {
    call([&] { bd_.row_logits(seq_, row, out); });
  }

 private:
  void body() {
    wait_turn();
    Session& session = w_.pool_.session(slot_);
    session.set_encoder([this](KvCache& kv, std::span<const int32_t> ids) { encode_prompt(kv, ids); });
    w_.run_on(*job_, slot_, this, true);
    session.set_encoder({});
    std::lock_guard<std::mutex> lock(mu_);
    state_ = State::kDone;
    cv_.notify_all();
  }
  void wait_turn() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return state_ == State::kTurn; });
  }
  // Ends or pauses the turn with `s` and waits for the next one; rethrows what the worker's work threw.
  void post(State s) {
    std::unique_lock<std::mutex> lock(mu_);
    state_ = s;
    cv_.notify_all();
    cv_.wait(lock, [&] { return state_ == State::kTurn; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }
  void call(std::function<void()> fn) {
    call_ = std::move(fn);
    post(State::kCall);
  }

  Worker& w_;
  std::shared_ptr<Job> job_;
  int slot_;
  BatchDenoiser& bd_;
  int seq_;
  bool keep_rows_ = job_->spec.sampler.json != nullptr;  // JSON mode asks for logits rows after a step
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  State state_ = State::kReady;
  std::function<void()> call_;
  std::exception_ptr error_;
  EncodeSeq block_;  // the pending committed-block encode
  // The pending denoise step.
  const KvCache* kv_ = nullptr;
  std::vector<int32_t> canvas_;
  ScKind kind_ = ScKind::kZero;
  float cutoff_ = 0, temperature_ = 1;
  RowStats* stats_ = nullptr;
  std::span<const double> u_;  // the draws' uniforms (the job's Generation holds them while it waits)
  int32_t* drawn_ = nullptr;
};

void Worker::loop_batched() {
  ModelBatchDenoiser bd(engine_.model());
  const int cap = std::min(opt_.max_batch, pool_.size());
  std::list<std::unique_ptr<Flight>> flights;
  bool closed = false;
  for (;;) {
    // Admit: wait for work only when nothing is in flight.
    while (static_cast<int>(flights.size()) < cap) {
      std::shared_ptr<Job> job = flights.empty() && !closed ? queue_.pop() : queue_.try_pop();
      if (!job) {
        closed = closed || flights.empty();
        break;
      }
      if (refuse(*job)) continue;
      const int slot = open_slot(*job);
      flights.push_back(std::make_unique<Flight>(*this, std::move(job), slot, bd));
      flights.back()->start();
    }
    if (flights.empty()) {
      if (closed) return;
      continue;
    }
    // Turns, in admission order; the committed blocks that asked to be encoded, in one pass, and those jobs'
    // turns again; then one batched forward over every canvas that asked for a step.
    std::vector<Flight*> encoding;
    for (const auto& f : flights) {
      const Flight::State s = f->state();
      if (s == Flight::State::kReady || s == Flight::State::kYield) f->turn();
      if (f->state() == Flight::State::kEncode) encoding.push_back(f.get());
    }
    if (!encoding.empty()) {
      std::vector<EncodeSeq> blocks;
      for (Flight* f : encoding) blocks.push_back(f->block());
      std::exception_ptr error;
      try {
        bd.encode_batch(blocks);
      } catch (...) {
        error = std::current_exception();
      }
      for (Flight* f : encoding) {
        f->stepped(error);
        f->turn();
      }
    }
    std::vector<Flight*> batch;
    for (const auto& f : flights)
      if (f->state() == Flight::State::kDenoise) batch.push_back(f.get());
    if (!batch.empty()) {
      std::vector<BatchItem> items;
      for (Flight* f : batch) items.push_back(f->item());
      const auto t0 = Clock::now();
      std::exception_ptr error;
      try {
        bd.denoise(items);
      } catch (...) {
        error = std::current_exception();
      }
      stats_.step_seconds.observe(std::chrono::duration<double>(Clock::now() - t0).count());
      stats_.batch_occupancy.observe(static_cast<double>(batch.size()));
      ++stats_.denoise_steps;
      for (Flight* f : batch) f->stepped(error);
    }
    for (auto it = flights.begin(); it != flights.end();) {
      if ((*it)->state() != Flight::State::kDone) {
        ++it;
        continue;
      }
      (*it)->join();
      close_slot((*it)->slot());
      it = flights.erase(it);
    }
  }
}

}  // namespace dg
