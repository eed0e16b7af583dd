// The block-diffusion generation loop (SPEC.md §4.3; seed §6-7): per block, denoise a random canvas with the
// entropy-bound sampler until a stop rule fires or the step budget ends, commit the last step's argmax, scan it for
// a stop token, and encode the committed block into the KV cache before the next block. The loop itself is
// Generation (stepper.h), resumable at every model call; generate() drives one, BatchRunner (batch.h) many.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "diffusion/captured_step.h"
#include "diffusion/options.h"
#include "diffusion/sampler.h"
#include "ops/row_stats/row_stats.h"
#include "model/forward.h"
#include "model/kv_cache.h"

namespace dg {

struct StepInfo {
  int block = 0, step = 0;  // step counts from 1 within the block
  float temperature = 0.0f;
  float mean_entropy = 0.0f;
  int accepted = 0;
  StopRule stop = StopRule::kNone;
};

struct BlockInfo {
  int block = 0;
  int canvas = 0;       // canvas length used (smaller after an empty-reply re-roll)
  int steps = 0;        // denoise forwards of the committed attempt
  int forwards = 0;     // denoise forwards including re-rolled attempts
  StopRule stop = StopRule::kNone;
  int rerolls = 0;
  int kept = 0;         // tokens committed (canvas minus a confidence trim)
  bool trimmed = false;
  int pad_gated = 0;    // steps of the committed attempt at which the pad gate held an all-pad canvas
  int constrained = 0;  // JSON mode: tokens the constraint replaced in this block
  // Seconds from the committed attempt's start (its canvas drawn, the step about to be asked for) to the end of each
  // of its steps, as the generation's caller saw them: a serving timeline (the op-log's block records).
  std::vector<float> step_ends;
};

// What one denoise step saw and decided (valid during the callback).
struct StepView {
  std::span<const int32_t> canvas_in, argmax, canvas_out;
  std::span<const uint8_t> accept;
  std::span<const float> entropy;
};

struct GenerateEvents {
  std::function<void(const StepInfo&, const StepView&)> on_step;
  // on_step reads the StepView's rows. false: it reads only the StepInfo and gets an empty view, which lets the
  // single-stream loop keep the step decisions on the backend (docs/CUDA.md).
  bool step_rows = true;
  std::function<void(const BlockInfo&, std::span<const int32_t> committed)> on_block;
  // After each encode into the cache: the prompt first (before the first denoising step), then each committed block.
  std::function<void(size_t tokens)> on_encoded;
  // The prompt's prefill, chunk by chunk (PrefillProgress; --prefill-chunk sets the chunk). Set it only where it is
  // shown: each call waits for the backend to finish the chunk.
  PrefillProgress on_prefill;
  // Asked before every denoise step; true ends the generation at once (the block in progress is dropped).
  std::function<bool()> cancel;
};

enum class FinishReason : uint8_t { kStop, kLength, kCancelled };
const char* finish_name(FinishReason f);  // "stop" | "length" | "cancelled"

struct GenerateResult {
  std::vector<int32_t> tokens;     // the answer: trimmed at the first stop token and to max_new_tokens
  std::vector<int32_t> committed;  // every committed token, stop token and beyond included
  FinishReason finish = FinishReason::kLength;
  int32_t stop_token = -1;
  std::vector<BlockInfo> blocks;
  int forwards = 0;  // denoise forwards in total
  int fused_commits = 0;  // committed blocks encoded in the next step's forward (Model::fused_commit)
};

// What the block loop needs from a model: encode committed tokens, and one denoise forward reduced to per-row
// statistics. The [canvas, vocab] logits never leave the denoiser (on a GPU they stay on the device): it keeps the
// tempered logits to self-condition the next step and to draw categorical samples from.
class Denoiser {
 public:
  virtual ~Denoiser() = default;
  virtual int canvas() const = 0;
  virtual int64_t vocab() const = 0;
  // Positions the model takes (max_position_embeddings); 0: no limit stated.
  virtual int64_t max_positions() const { return 0; }
  virtual void encode(KvCache& kv, std::span<const int32_t> ids) = 0;
  // A committed block's encode may wait for the next denoise step and run in its forward (one pass over the weights
  // for both; Model::commit_denoise_ids) where can_defer_encode(); flush_encode() encodes a waiting block alone. The
  // ids are copied; drop_encode() forgets a waiting block (a failed generation). By default: no deferral
  // (defer_encode encodes at once).
  virtual bool can_defer_encode() const { return false; }
  virtual void defer_encode(KvCache& kv, std::span<const int32_t> ids);
  virtual void flush_encode() {}
  virtual void drop_encode() {}
  virtual int fused_encodes() const { return 0; }  // deferred encodes run in a step's forward so far
  // The prompt's encode, reporting its progress. By default: one encode, reported before and after.
  virtual void encode_reporting(KvCache& kv, std::span<const int32_t> ids, const PrefillProgress& progress);
  // Denoises `canvas` at positions kv.len()...; `kind` says what self-conditions this step (kLogits: the previous
  // step's tempered logits). Writes argmax / entropy / p_max of softmax(logits / temperature) per row to `stats`.
  virtual void denoise(const KvCache& kv, std::span<const int32_t> canvas, ScKind kind, float sparse_cutoff,
                       float temperature, RowStats* stats) = 0;
  // One categorical draw per row from softmax(last logits / temperature), by inverse CDF at u[row].
  virtual void draw(std::span<const double> u, int32_t* out) = 0;
  // A step whose draws' uniforms are known before it: denoise, then the draws to `drawn` [canvas]. By default
  // denoise() then draw(); a batched denoiser draws inside the step, keeping no logits between calls.
  virtual void denoise_draw(const KvCache& kv, std::span<const int32_t> canvas, ScKind kind, float sparse_cutoff,
                            float temperature, RowStats* stats, std::span<const double> u, int32_t* drawn);
  // JSON mode: the softcapped logits [vocab] of one row of the last denoise step. By default: an error.
  virtual void row_logits(int row, std::vector<float>& out);

  // Device decisions (src/ops/decide/decide.h): where can_decide(), a step can run as one denoise_decide, whose
  // canvas, draws and decisions stay where the model runs; the host reads the DecideStatus. By default: none.
  virtual bool can_decide() { return false; }
  // Starts an attempt on the initial canvas; lcg: the RNG state after its draws; jump: Lcg::jumps(2 * rows).
  virtual void decide_start(const DecideParams& p, std::span<const int32_t> canvas, uint64_t lcg,
                            std::span<const LcgJump> jump);
  // Denoises the decider's canvas, then row statistics, draws and decisions; the canvas becomes the next one.
  virtual DecideStatus denoise_decide(const KvCache& kv, ScKind kind, float sparse_cutoff, float temperature);
  virtual void decided_stats(RowStats* out);  // the last decided step's row statistics
};

// The Denoiser of a Model on its backend.
class ModelDenoiser final : public Denoiser {
 public:
  explicit ModelDenoiser(const Model& m) : m_(m), graphs_(m.graphs()) {}
  int canvas() const override { return m_.config().canvas; }
  int64_t vocab() const override { return m_.config().vocab; }
  int64_t max_positions() const override { return m_.config().max_positions; }
  void encode(KvCache& kv, std::span<const int32_t> ids) override {
    flush_encode();
    m_.encode(kv, ids);
  }
  void encode_reporting(KvCache& kv, std::span<const int32_t> ids, const PrefillProgress& progress) override {
    flush_encode();
    m_.encode(kv, ids, nullptr, progress);
  }
  // The model's choice (Model::fused_commit): a committed block rides in the next attempt's first step.
  bool can_defer_encode() const override { return m_.fused_commit(); }
  void defer_encode(KvCache& kv, std::span<const int32_t> ids) override;
  void flush_encode() override;
  void drop_encode() override { deferred_kv_ = nullptr; }
  int fused_encodes() const override { return fused_encodes_; }
  void denoise(const KvCache& kv, std::span<const int32_t> canvas, ScKind kind, float sparse_cutoff,
               float temperature, RowStats* stats) override;
  void draw(std::span<const double> u, int32_t* out) override;
  void row_logits(int row, std::vector<float>& out) override;
  bool can_decide() override;
  void decide_start(const DecideParams& p, std::span<const int32_t> canvas, uint64_t lcg,
                    std::span<const LcgJump> jump) override;
  DecideStatus denoise_decide(const KvCache& kv, ScKind kind, float sparse_cutoff, float temperature) override;
  void decided_stats(RowStats* out) override;
  // Replays steps after a block's first through a captured graph where the backend can (CUDA): one capture per
  // block (the cache length is baked in), the ids refreshed outside it; the sampler statistics run after it.
  // Default: the model's (Model::graphs).
  void set_graphs(bool on) { graphs_ = on; }

 private:
  // The step's forward into logits_ from ids already on the backend (through the graph where one applies). After a
  // block's first step (not graphed) is issued, the graph of the steps after it is captured (Model::early_capture).
  void forward_ids(const KvCache& kv, const Tensor& ids, ScKind kind, float sparse_cutoff);
  // Whether a step of this kind runs through the graph, and the graph's key for the steps that do.
  bool graphed(ScKind kind) const;
  StepGraphKey graph_key(const KvCache& kv, const Tensor& ids, float sparse_cutoff) const;

  const Model& m_;
  bool graphs_;
  bool decider_made_ = false;
  std::unique_ptr<Decider> decider_;  // device decisions; null where the backend has none
  CapturedStep graph_;
  Tensor ids_;       // [rows] canvas ids for graph replays
  Tensor logits_;    // [rows, vocab] f32: the last step's softcapped logits
  Tensor tempered_;  // [rows, vocab]: logits / T in the activation storage, self-conditioning the next step
  float temperature_ = 1.0f;
  // What the last step's lm_head left open for the statistics (step_open_; graph_open_: the captured graph's), its
  // W8A8 input-row scales, and whether logits_ still hold it open (the statistics did not store them back): a
  // reader of the logits finishes them first (finish_logits).
  OpenLogits step_open_, graph_open_;
  Tensor row_scale_;
  bool logits_open_ = false;
  bool decide_draws_ = false;  // the decider's attempt draws categorically: its steps store the logits back
  void finish_logits();
  // The step's forward into logits_, the lm_head left open where the backend leaves single sequences' open.
  OpenLogits forward_open(const KvCache& kv, const Tensor& ids, const ScInput& sc);
  KvCache* deferred_kv_ = nullptr;  // a committed block waiting for the next step's forward (defer_encode)
  std::vector<int32_t> deferred_;
  int fused_encodes_ = 0;
};

// Encodes `prompt` (tokens not yet in `kv`), then generates. The last committed block is not encoded into `kv`.
GenerateResult generate(Denoiser& model, KvCache& kv, std::span<const int32_t> prompt, const SamplerOptions& opt,
                        const GenerateEvents* events = nullptr);
GenerateResult generate(const Model& model, KvCache& kv, std::span<const int32_t> prompt, const SamplerOptions& opt,
                        const GenerateEvents* events = nullptr);

// `opt` with max_new_tokens cut so that every canvas after `context` tokens stays within `max_positions` (0: no
// limit); throws dg::Error naming max_position_embeddings when the context leaves no room for one canvas.
SamplerOptions within_positions(const SamplerOptions& opt, int64_t context, int canvas, int64_t max_positions);

// The commit-time confidence trim (seed §9 #11): the first row at index >= floor, before the first stop or pad
// row, whose p_max is below tau and whose argmax equals a neighbour's; returns the row count to keep.
int confidence_trim(std::span<const int32_t> argmax, std::span<const float> p_max, const SamplerOptions& opt);

}  // namespace dg
