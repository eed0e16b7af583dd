// The batched worker loop. Each job in flight runs its host logic (chat rendering, reply parsing, stop strings,
// events, op-log) on a thread of its own, but only while it holds the turn: the worker hands the turn to one job
// at a time, and every model call the job makes is executed by the worker thread on the job's behalf. A turn ends
// when the job asks for a denoise step (it joins this round's batch) or an encode (a committed block, or prompt
// tokens: batched with the other jobs'), or finishes. A round: admit queued jobs, give each ready job its turn, run
// one encoder pass over the committed blocks and the prompt tokens within the round's budget (shared in turns,
// PrefillRotation), give the jobs whose encode is done their turn again, run one batched forward over every
// waiting canvas.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <list>
#include <mutex>

#include <fmt/format.h>

#include "core/error.h"
#include "diffusion/batch.h"
#include "serving/worker.h"

namespace dg {

class Worker::Flight final : public Denoiser {
 public:
  enum class State : uint8_t { kReady, kTurn, kCall, kEncode, kDenoise, kDone };

  Flight(Worker& w, std::shared_ptr<Job> job, int slot, BatchDenoiser& bd, uint64_t admitted)
      : w_(w), job_(std::move(job)), slot_(slot), bd_(bd), seq_(bd.open()), admitted_(admitted) {}
  ~Flight() override { bd_.close(seq_); }

  void start() { thread_ = std::thread([this] { body(); }); }
  void join() { thread_.join(); }
  State state() {
    std::lock_guard<std::mutex> lock(mu_);
    return state_;
  }
  int slot() const { return slot_; }
  uint64_t admitted() const { return admitted_; }  // admission order
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
  // Committed blocks: encoded whole in this round's encoder pass.
  void encode(KvCache& kv, std::span<const int32_t> ids) override { wait_encoded(kv, ids, false); }
  // Prompts (the session's sync): as much of them per round as the round's budget gives (Worker::encode_round).
  void encode_prompt(KvCache& kv, std::span<const int32_t> ids) { wait_encoded(kv, ids, true); }
  // Worker side, in kEncode: whether the ids are a prompt's, how many are left, and the next n of them.
  bool prompt() const { return prompt_; }
  int64_t waiting() const { return static_cast<int64_t>(pending_.ids.size()); }
  EncodeSeq take(int64_t n) {
    const EncodeSeq s{pending_.kv, pending_.ids.first(static_cast<size_t>(n))};
    pending_.ids = pending_.ids.subspan(static_cast<size_t>(n));
    return s;
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
  void wait_encoded(KvCache& kv, std::span<const int32_t> ids, bool prompt) {
    if (ids.empty()) return;
    pending_ = EncodeSeq{&kv, ids};
    prompt_ = prompt;
    post(State::kEncode);
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
  uint64_t admitted_;
  bool keep_rows_ = job_->spec.sampler.constrained();  // JSON mode and strict calls ask for logits rows
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  State state_ = State::kReady;
  std::function<void()> call_;
  std::exception_ptr error_;
  EncodeSeq pending_;    // in kEncode: the ids still to encode
  bool prompt_ = false;  // they are a prompt's (else a committed block's)
  // The pending denoise step.
  const KvCache* kv_ = nullptr;
  std::vector<int32_t> canvas_;
  ScKind kind_ = ScKind::kZero;
  float cutoff_ = 0, temperature_ = 1;
  RowStats* stats_ = nullptr;
  std::span<const double> u_;  // the draws' uniforms (the job's Generation holds them while it waits)
  int32_t* drawn_ = nullptr;
};

// One encoder pass: every committed block waiting, and prompt tokens within the round's budget, shared in turns.
// Jobs whose ids are all in the cache get their turn again (a prompt the budget cut waits for a later round).
void Worker::encode_round(BatchDenoiser& bd, PrefillRotation& rotation, std::span<Flight* const> encoding,
                          HeldEncode* held) {
  std::vector<EncodeSeq> seqs;
  std::vector<Flight*> taken, done, prompts;  // taken: every job in the pass; done: those it finishes
  std::vector<uint64_t> order;
  std::vector<int64_t> waiting;
  for (Flight* f : encoding) {
    if (f->prompt()) {
      prompts.push_back(f);
      order.push_back(f->admitted());
      waiting.push_back(f->waiting());
    } else if (held != nullptr) {  // a committed block, for the round's denoise forward: its ids copied (the job's
      const EncodeSeq s = f->take(f->waiting());  // change once it hears they are encoded), its turn at once
      held->seqs.push_back(EncodeSeq{s.kv, held->ids.emplace_back(s.ids.begin(), s.ids.end())});
      held->blocks.push_back(f);
      f->stepped(nullptr);
      f->turn();
    } else {
      seqs.push_back(f->take(f->waiting()));
      taken.push_back(f);
      done.push_back(f);
    }
  }
  const std::vector<PrefillTake> picked = rotation.pick(order, waiting, opt_.prefill_chunk);
  int64_t prompt_tokens = 0;
  for (const PrefillTake& t : picked) {
    Flight* f = prompts[t.index];
    seqs.push_back(f->take(t.tokens));
    taken.push_back(f);
    if (f->waiting() == 0) done.push_back(f);
    prompt_tokens += t.tokens;
  }
  if (!picked.empty()) {
    stats_.prefill_prompts.observe(static_cast<double>(picked.size()));
    stats_.prefill_tokens.observe(static_cast<double>(prompt_tokens));
  }
  if (seqs.empty()) return;
  std::exception_ptr error;
  try {
    bd.encode_batch(seqs);
  } catch (...) {
    error = std::current_exception();
  }
  for (Flight* f : error ? taken : done) {  // an encode that failed fails every job in it
    f->stepped(error);
    f->turn();
  }
}

void Worker::loop_batched() {
  ModelBatchDenoiser bd(engine_.model());
  PrefillRotation rotation;
  const int cap = std::min(opt_.max_batch, pool_.size());
  std::list<std::unique_ptr<Flight>> flights;
  uint64_t admitted = 0;
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
      flights.push_back(std::make_unique<Flight>(*this, std::move(job), slot, bd, admitted++));
      flights.back()->start();
    }
    if (flights.empty()) {
      if (closed) return;
      continue;
    }
    // Turns, in admission order; one encoder pass over what asked to be encoded, and the turns of the jobs it
    // finished; then one batched forward over every canvas that asked for a step.
    std::vector<Flight*> encoding;
    for (const auto& f : flights) {
      if (f->state() == Flight::State::kReady) f->turn();
      if (f->state() == Flight::State::kEncode) encoding.push_back(f.get());
    }
    // With fused commits the pass waits for the denoise forward (alone where no canvas asked for a step).
    HeldEncode held;
    if (!encoding.empty()) encode_round(bd, rotation, encoding, bd.fuses_encodes() ? &held : nullptr);
    std::vector<Flight*> batch;
    for (const auto& f : flights)
      if (f->state() == Flight::State::kDenoise) batch.push_back(f.get());
    if (!batch.empty()) {
      std::vector<BatchItem> items;
      for (Flight* f : batch) items.push_back(f->item());
      const auto t0 = Clock::now();
      std::exception_ptr error;
      try {
        bd.denoise_encoding(items, held.seqs);
      } catch (...) {
        error = std::current_exception();
      }
      stats_.step_seconds.observe(std::chrono::duration<double>(Clock::now() - t0).count());
      stats_.batch_occupancy.observe(static_cast<double>(batch.size()));
      ++stats_.denoise_steps;
      for (Flight* f : batch) f->stepped(error);
    } else if (!held.seqs.empty()) {
      // Blocks alone (their jobs ended in their turn, none asked for a step). If the pass fails, each cache is left
      // without its block and says so by its length, so a session's next turn encodes it again.
      try {
        bd.encode_batch(held.seqs);
      } catch (const std::exception& e) {
        say(fmt::format("the encoder pass of {} committed block(s) failed: {}", held.seqs.size(), e.what()));
      }
    }
    for (auto it = flights.begin(); it != flights.end();) {
      if ((*it)->state() != Flight::State::kDone) {
        ++it;
        continue;
      }
      (*it)->join();
      close_slot((*it)->job(), (*it)->slot());
      it = flights.erase(it);
    }
  }
}

}  // namespace dg
