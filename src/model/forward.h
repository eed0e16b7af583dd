// The DiffusionGemma forward passes, written once against the Backend op set and read top to bottom like
// modeling_diffusion_gemma.py: the encoder ("prefill"/"commit": causal, writes KV) and the decoder ("denoise":
// bidirectional canvas over the read-only cache, self-conditioning before layer 0, tied lm_head, softcap).
// Layer math: SPEC.md §2.4-2.7; masks: §2.8; self-conditioning: §3.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/model_config.h"
#include "model/kv_cache.h"
#include "model/weights.h"

namespace dg {

// Receives named intermediates ("enc.l3.out", "dec.x0", "dec.logits", ...) when tracing is wanted.
using ForwardTrace = std::function<void(const std::string& name, const Tensor& t)>;

// What feeds self-conditioning for one denoise step.
enum class ScKind : uint8_t {
  kZero,       // first step, reference semantics: soft signal 0 (the SC MLP output is exactly 0)
  kSelfEmbed,  // first step, the seed's contract: the SC MLP runs on the canvas's own token embedding
  kLogits,     // later steps: soft embedding of the previous step's processed logits
};

struct ScInput {
  ScKind kind = ScKind::kZero;
  const Tensor* logits = nullptr;  // [canvas, vocab] processed logits, already rounded to the activation storage
  float sparse_cutoff = 0.0f;      // 0: exact soft embedding; else the survivor cutoff (seed: e^-10)
};

// One sequence of a batched denoise: its canvas at positions kv->len()... over its own cache.
struct DenoiseSeq {
  const KvCache* kv = nullptr;
  std::span<const int32_t> canvas;
  ScInput sc;
};

// One sequence of a batched encode: ids appended to its cache at positions kv->len()...
struct EncodeSeq {
  KvCache* kv = nullptr;
  std::span<const int32_t> ids;
};

// Prefill progress: (0, total) before the first chunk, then (done, total) after each chunk once the backend has
// finished it (the caller may time it).
using PrefillProgress = std::function<void(int64_t done, int64_t total)>;

class Model {
 public:
  // `w` must be the weights as `be` reads them (Backend::upload).
  Model(const ModelConfig& cfg, const ModelWeights& w, Backend& be);

  // Encodes ids at positions kv.len()... (causal; sliding layers see the last window tokens), appending their
  // K/V to the cache. The last layer computes only what the cache needs unless a trace is attached. Prompts
  // longer than the prefill chunk run as consecutive chunks (same result: each chunk attends to the cached ones),
  // which bounds activation memory for long prompts; a traced encode runs in one piece. `progress`, when set, hears
  // of every chunk (PrefillProgress).
  void encode(KvCache& kv, std::span<const int32_t> ids, const ForwardTrace* trace = nullptr,
              const PrefillProgress& progress = {}) const;
  void set_prefill_chunk(int64_t tokens);  // > 0
  // Several sequences' ids in one encoder pass (committed blocks of concurrent requests): the row-wise ops run over
  // all rows, RoPE, causal attention and the cache writes per sequence. Same result as encoding each alone.
  void encode_batch(std::span<const EncodeSeq> seqs) const;
  int64_t prefill_chunk() const { return prefill_chunk_; }
  // Whether denoisers of this model replay steps through captured graphs where the backend can (CUDA): the default
  // of every ModelDenoiser (ask, chat, serve, bench); --no-graphs turns it off.
  void set_graphs(bool on) { graphs_ = on; }
  bool graphs() const { return graphs_; }
  // Whether those denoisers capture a block's graphed step while its first (ungraphed) step runs on the device,
  // instead of after it (docs/CUDA.md, "Early capture"); --no-early-capture turns it off (A/B, the same tokens).
  void set_early_capture(bool on) { early_capture_ = on; }
  bool early_capture() const { return early_capture_; }
  // Whether those denoisers encode a committed block in the forward of the next block's first step
  // (commit_denoise_ids) instead of in a pass of its own; --fused-commit turns it on.
  void set_fused_commit(bool on) { fused_commit_ = on; }
  bool fused_commit() const { return fused_commit_; }
  // Top-k sparse attention on the full-attention layers, prefill and denoise alike (src/ops/attention/
  // attention_topk.h; --attention-topk); off (dense) by default. Sliding layers are never affected.
  void set_attention_topk(const AttnTopk& topk);
  const AttnTopk& attention_topk() const { return attn_topk_; }

  // Denoise forward for a canvas at positions kv.len()...; writes softcapped logits [canvas, vocab] (f32).
  void denoise(const KvCache& kv, std::span<const int32_t> canvas, const ScInput& sc, Tensor& logits,
               const ForwardTrace* trace = nullptr) const;

  // The same with the canvas ids already in a backend tensor (graph replays refill it between steps).
  void denoise_ids(const KvCache& kv, const Tensor& ids, const ScInput& sc, Tensor& logits,
                   const ForwardTrace* trace = nullptr) const;
  // The same with the lm_head's last elementwise step possibly left open (Backend::lm_head_open; a W8A8 product's
  // input-row scales to row_scale [canvas] f32): what the result says is left for the row statistics to finish.
  [[nodiscard]] OpenLogits denoise_ids_open(const KvCache& kv, const Tensor& ids, const ScInput& sc, Tensor& logits,
                                            Tensor& row_scale) const;
  // Batched denoise: the canvases of several sequences in one forward. Embedding, self-conditioning, dense, MoE
  // and norms run over the concatenated rows; RoPE and attention run per sequence (own cache, own positions).
  // Returns final_norm(x) [sum of canvases, hidden]; the caller applies lm_head in bounded row chunks
  // (lm_head_rows), since the logits of every row at once would not fit at full shape.
  Tensor denoise_batch(std::span<const DenoiseSeq> seqs) const;
  // encode_batch(enc) and denoise_batch(dec) in one forward, the weights read once for both; returns denoise_batch's
  // rows. A sequence may be in both: its canvas then follows the ids encoded here (the next block's first step with
  // the block committed before it). Each sequence's K/V and rows as from the two calls, on the CPU reference bit for
  // bit (a GPU's products may sum in another order for another row count).
  Tensor encode_denoise_batch(std::span<const EncodeSeq> enc, std::span<const DenoiseSeq> dec) const;
  // The same for one sequence from ids on the backend: `commit` encoded into kv, then the canvas `ids` at the
  // positions after it denoised into softcapped logits [canvas, vocab] (f32), as encode() then denoise_ids().
  void commit_denoise_ids(KvCache& kv, std::span<const int32_t> commit, const Tensor& ids, const ScInput& sc,
                          Tensor& logits) const;
  // Softcapped logits [rows, vocab] (f32) of final-normed rows y.
  void lm_head_rows(const Tensor& y, Tensor& logits) const;
  // The same, the softcap possibly left for Backend::row_stats_open (what the result says is left open).
  [[nodiscard]] OpenLogits lm_head_rows_open(const Tensor& y, Tensor& logits) const;
  // Throws dg::Error naming the first id outside the vocabulary.
  void check_ids(std::span<const int32_t> ids, const char* what) const;
  // Positions up to `end` (exclusive) stay within max_position_embeddings (when config.json states it).
  void check_positions(int64_t end, const char* what) const;

  // One decoder layer on h [canvas, hidden] at positions kv.len()... (for per-layer parity tests and tools).
  Tensor decoder_layer(int l, const Tensor& h, const KvCache& kv, const ForwardTrace* trace = nullptr) const {
    return layer(l, h, kv.len(), Phase::kDecode, nullptr, kv, false, trace);
  }

  const ModelConfig& config() const { return cfg_; }
  Backend& backend() const { return be_; }

 private:
  // kMixed: the encoder's segments (those with a cache to write) first, then the decoder's (mixed_forward).
  enum class Phase { kEncode, kDecode, kMixed };
  // Rows [row0, row0 + rows) of a layer's input belong to one sequence at positions pos0... over cache kv.
  struct Segment {
    int64_t row0 = 0, rows = 0, pos0 = 0;
    const KvCache* kv = nullptr;
    KvCache* write = nullptr;  // encoder: where this sequence's K/V go
  };
  static bool encodes(const Segment& sg, Phase phase) {
    return phase == Phase::kEncode || (phase == Phase::kMixed && sg.write != nullptr);
  }
  // The encoder's segments of `seqs` from row 0 (empty ones skipped; a cache at most once) into segs, their ids into
  // text; returns their rows.
  int64_t encoder_segments(std::span<const EncodeSeq> seqs, std::vector<Segment>& segs,
                           std::vector<int32_t>& text) const;
  // The encoder's embedding of ids (image-token ids as pad) into h.
  void encoder_embed(std::vector<int32_t> ids, Tensor& h) const;
  // The rows of a mixed forward's encoder segments (they lead).
  static int64_t encoder_rows(std::span<const Segment> segs);
  // One layer on h [rows, hidden] at positions pos0...; returns the new residual stream. norm (untraced forwards, or
  // null): on entry this layer's input norm of h where the layer before wrote it, on return the next layer's input
  // norm of the result where this layer's tail wrote it (Backend::linear_moe_ffn_tail's `next`); a forward over the
  // layers passes one InputNorm to each of them in turn.
  Tensor layer(int l, const Tensor& h, int64_t pos0, Phase phase, KvCache* kv_write, const KvCache& kv,
               bool kv_only, const ForwardTrace* trace, InputNorm* norm = nullptr) const;
  // The same over several sequences' rows.
  Tensor layer(int l, const Tensor& h, std::span<const Segment> segs, Phase phase, bool kv_only,
               const ForwardTrace* trace, InputNorm* norm = nullptr) const;
  // The input norm of layer l for rows of x: its buffers (and codes buffers where its q/k/v products read E4M3 rows),
  // unfilled.
  InputNorm input_norm_buffers(int l, const Tensor& x) const;
  // A canvas of encode_denoise_batch: ids on the backend.
  struct DecodeRows {
    const KvCache* kv = nullptr;
    Tensor ids;
    ScInput sc;
  };
  // The encoder's rows of `enc` and the decoder's of `dec` through every layer; commits enc's caches; returns
  // final_norm of the decoder's rows.
  Tensor mixed_forward(std::span<const EncodeSeq> enc, std::span<const DecodeRows> dec) const;
  // denoise_ids up to the final norm: y [canvas, hidden] (logits: the buffer the lm_head will fill, checked).
  Tensor denoise_rows(const KvCache& kv, const Tensor& ids, const ScInput& sc, const Tensor& logits,
                      const ForwardTrace* trace) const;
  void check_sc_logits(const ScInput& sc, int64_t rows) const;  // a logits input of `rows` rows is there
  // x0 rows of one sequence (embedding and self-conditioning) into x; `soft`: its soft embedding already computed
  // (a logits input), else computed here.
  void denoise_input(const Tensor& ids, const ScInput& sc, Tensor& x, const ForwardTrace* trace,
                     const Tensor* soft = nullptr) const;

  void encode_chunk(KvCache& kv, std::span<const int32_t> ids, const ForwardTrace* trace) const;
  // The tables of the vocabulary products: the fp8 copies where the engine made them (--vocab-act), else the tied
  // embedding.
  const Tensor& lm_head_table() const { return w_.embed_fp8.empty() ? w_.embed : w_.embed_fp8; }
  // lm_head_rows' checks of the buffer and its stage mark.
  void begin_lm_head(const Tensor& y, const Tensor& logits) const;
  const Tensor& soft_embed_table() const { return w_.embed_fp8_t.empty() ? w_.embed : w_.embed_fp8_t; }

  const ModelConfig& cfg_;
  const ModelWeights& w_;
  Backend& be_;
  std::vector<std::vector<float>> inv_freq_;  // per layer, [head_dim / 2]
  int64_t prefill_chunk_ = 4096;
  bool graphs_ = true;
  bool early_capture_ = true;
  bool fused_commit_ = true;
  AttnTopk attn_topk_;
};

}  // namespace dg
