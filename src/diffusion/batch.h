// Lock-step batched generation: many requests, each a Generation (src/diffusion/stepper.h), stepped together so
// that one forward denoises the canvases of all of them (continuous batching: requests join and leave between
// steps; prompt prefill runs in bounded chunks between steps, so a long prompt cannot stall running canvases).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "diffusion/captured_step.h"
#include "diffusion/stepper.h"

namespace dg {

// One sequence's part of a batched denoise step.
struct BatchItem {
  int seq = -1;  // the BatchDenoiser's handle (open())
  const KvCache* kv = nullptr;
  StepRequest step;
  RowStats* stats = nullptr;  // [canvas] out
  int32_t* drawn = nullptr;   // [canvas] out when step.u is not empty: the categorical draws of this step
  bool keep_rows = false;     // JSON mode: row_logits() may be asked for this sequence after the call
};

// What the batched driver needs from a model: encode, and one denoise forward over several sequences' canvases
// reduced to per-row statistics and, where a step asks, categorical draws. Each sequence keeps its tempered logits
// between steps (its self-conditioning) and nothing else: no logits outlive the call.
class BatchDenoiser {
 public:
  virtual ~BatchDenoiser() = default;
  virtual int canvas() const = 0;
  virtual int64_t vocab() const = 0;
  // Positions the model takes (max_position_embeddings); 0: no limit stated.
  virtual int64_t max_positions() const { return 0; }
  virtual void encode(KvCache& kv, std::span<const int32_t> ids) = 0;
  // Several sequences' ids at once (committed blocks of concurrent requests); by default one after another.
  virtual void encode_batch(std::span<const EncodeSeq> seqs) {
    for (const EncodeSeq& s : seqs) encode(*s.kv, s.ids);
  }
  virtual int open() = 0;  // a handle for a new sequence
  virtual void close(int seq) = 0;
  virtual void denoise(std::span<const BatchItem> items) = 0;
  // Whether denoise_encoding runs its encodes in the step's forward (Model::fused_commit); by default not.
  virtual bool fuses_encodes() const { return false; }
  // encode_batch(enc), then denoise(items); a denoiser that fuses_encodes() runs both in one forward, the weights
  // read once (Model::encode_denoise_batch: a sequence may be in both, its canvas after the ids encoded).
  virtual void denoise_encoding(std::span<const BatchItem> items, std::span<const EncodeSeq> enc) {
    if (!enc.empty()) encode_batch(enc);
    denoise(items);
  }
  // JSON mode: the softcapped logits [vocab] of one row of a sequence's canvas in the last denoise() call.
  virtual void row_logits(int seq, int row, std::vector<float>& out);
};

// The BatchDenoiser of a Model on its backend: Model::denoise_batch, then lm_head and the row statistics in chunks
// of at most `logit_rows` rows (the logits of 32 canvases of 256 rows over a 262k vocabulary would be 8.6 GB f32).
// A step of one sequence alone that self-conditions on its logits (every step of a block after its first) takes the
// single-sequence forward through a captured graph where the model's graphs are on and the backend has them, as
// ModelDenoiser does: one stream on `serve` runs the path `ask` runs.
class ModelBatchDenoiser final : public BatchDenoiser {
 public:
  explicit ModelBatchDenoiser(const Model& m, int64_t logit_rows = 2048);
  int canvas() const override { return m_.config().canvas; }
  int64_t vocab() const override { return m_.config().vocab; }
  int64_t max_positions() const override { return m_.config().max_positions; }
  void encode(KvCache& kv, std::span<const int32_t> ids) override { m_.encode(kv, ids); }
  void encode_batch(std::span<const EncodeSeq> seqs) override { m_.encode_batch(seqs); }
  int open() override;
  void close(int seq) override { tempered_.erase(seq); }
  void denoise(std::span<const BatchItem> items) override { step(items, {}); }
  bool fuses_encodes() const override { return m_.fused_commit(); }
  void denoise_encoding(std::span<const BatchItem> items, std::span<const EncodeSeq> enc) override;
  // From the last forward's hidden states: lm_head over that one row only.
  void row_logits(int seq, int row, std::vector<float>& out) override;

 private:
  // The step of `items`, with `enc` encoded in its forward (empty: none; a lone self-conditioned step may then run
  // through the graph).
  void step(std::span<const BatchItem> items, std::span<const EncodeSeq> enc);
  bool graphed(std::span<const BatchItem> items) const;
  void denoise_graphed(const BatchItem& it);  // one sequence through CapturedStep, then its statistics and draws
  // A lone sequence's ungraphed step (a block's first) issued, its next steps' graph captured before the statistics
  // wait for the device (Model::early_capture).
  void capture_ahead(const BatchItem& it, const Tensor& logits, Tensor& tempered);
  // The graph of `it`'s self-conditioned step from ids_ into logits (CapturedStep::prepare: captured where its key
  // changed); the backend's launch_captured() replays it.
  void capture(const BatchItem& it, const Tensor& logits, Tensor& tempered);

  const Model& m_;
  int64_t logit_rows_;
  int next_ = 0;
  std::map<int, Tensor> tempered_;  // per sequence: [rows, vocab] tempered logits in the activation storage
  // [>= logit_rows, vocab] f32, reused chunk by chunk; after a step a sequence that drew nothing may have left its
  // rows as the lm_head's open sums (Backend::lm_head_open): nothing reads them later
  Tensor logits_;
  Tensor last_y_;  // the last denoise's final-normed rows [sum of canvases, hidden], when an item asked keep_rows
  std::map<int, std::pair<int64_t, int64_t>> last_rows_;  // per keep_rows sequence of that call: first row, rows
  Tensor row_;                      // [1, vocab] f32 for row_logits
  CapturedStep graph_;
  Tensor ids_;  // [rows] the graphed step's canvas ids, refreshed outside the graph
};

// One round's share of the prompt tokens waiting to be encoded: prompts take turns in admission order, each round
// starting after the prompt served last, and take what they wait for up to what is left of the budget. A long
// prompt holds back the prompts behind it by at most one round, and prompts that keep arriving cannot hold it
// back for longer than one turn through them. A prompt the budget would cut with at most budget / 8 tokens left
// takes them too (a 4,107-token chat turn at a budget of 4,096 in one round, not a second pass over the weights for
// its last 11 tokens): a round encodes at most prefill_round_limit(budget) prompt tokens.
struct PrefillTake {
  size_t index = 0;    // into the waiting prompts of the call
  int64_t tokens = 0;  // to encode this round
};
inline int64_t prefill_round_limit(int64_t budget) {
  return budget + std::min(budget / 8, std::numeric_limits<int64_t>::max() - budget);  // no overflow at any budget
}
class PrefillRotation {
 public:
  // ids: the waiting prompts' admission numbers, increasing; waiting: the tokens each still needs (> 0).
  std::vector<PrefillTake> pick(std::span<const uint64_t> ids, std::span<const int64_t> waiting, int64_t budget);

 private:
  uint64_t next_ = 0;  // the first prompt at or after this admission number goes first
};

struct BatchOptions {
  int max_batch = 32;               // requests denoised together; more wait
  int64_t prefill_tokens = 4096;    // prompt tokens encoded per round, all prompts together (PrefillRotation)
};

// Drives requests through a BatchDenoiser: each round() runs one batched encode of the committed blocks of running
// requests and of prompt tokens within the round's budget (PrefillRotation), and then one batched denoise step
// over every admitted request in its denoise phase.
class BatchRunner {
 public:
  struct Done {
    int id = -1;
    GenerateResult result;
  };

  BatchRunner(BatchDenoiser& d, BatchOptions opt);
  ~BatchRunner();

  // Queues a request; `kv` and `events` must outlive it. Returns its id. The prompt is the tokens not yet in kv.
  int add(KvCache& kv, std::span<const int32_t> prompt, const SamplerOptions& opt,
          const GenerateEvents* events = nullptr);
  bool idle() const { return active_.empty() && waiting_.empty(); }
  size_t active() const { return active_.size(); }
  // One round; returns the number of canvases in its denoise forward (0: none ran).
  int round();
  // Requests finished since the last call, in finishing order.
  std::vector<Done> take_finished();

 private:
  struct Request {
    int id = -1, seq = -1;
    KvCache* kv = nullptr;
    std::unique_ptr<Generation> gen;
    std::vector<RowStats> stats;
    std::vector<int32_t> drawn;
  };
  void admit();
  void retire_done();

  BatchDenoiser& d_;
  BatchOptions opt_;
  PrefillRotation prefill_;
  int next_id_ = 0;
  std::deque<std::unique_ptr<Request>> waiting_;
  std::vector<std::unique_ptr<Request>> active_;
  std::vector<Done> finished_;
};

// Generates every request in lock-step to its end (tests and benchmarks): results in request order.
struct BatchJob {
  KvCache* kv = nullptr;
  std::vector<int32_t> prompt;
  SamplerOptions opt;
  const GenerateEvents* events = nullptr;
};
std::vector<GenerateResult> generate_batch(BatchDenoiser& d, std::span<BatchJob> jobs, BatchOptions opt = {});

}  // namespace dg
