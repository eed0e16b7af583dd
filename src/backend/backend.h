// Backend: where the forward pass runs. The model (src/model/forward.cpp) is written once as a sequence of these
// op calls; each backend owns its activation buffers and the KV cache storage. The CPU backend is the reference
// (f32 math; activations and KV optionally rounded through bf16/f16 where a GPU would store them).
// Ops take and return activations as Tensors allocated by the same backend, and op-level views of what else they
// read (a KV cache layer, the MoE's weights): the interface knows no model type. Backends are made through the
// registry (src/backend/registry.h); docs/ARCHITECTURE.md says how to add an op or a backend.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/kv_layer.h"
#include "core/host_memory.h"
#include "core/tensor.h"
#include "ops/attention/attention_topk.h"
#include "ops/decide/decide.h"
#include "ops/moe/moe.h"
#include "ops/residual/row_scalar.h"
#include "ops/rope/rope.h"
#include "ops/row_stats/row_stats.h"

namespace dg {

// What a backend's graphs cost on the host so far: captures (the step's ops enqueued into a capture), and making
// them replayable (a first or changed topology instantiated, a same-topology capture updated in place).
struct GraphStats {
  uint64_t captures = 0, instantiations = 0, updates = 0;
  double capture_s = 0, instantiate_s = 0, update_s = 0;
};

// What lm_head_open left undone in its logits: the softcap (cap), and for a W8A8 product its scales (the input rows'
// [rows] and the table rows' [vocab]), applied as softcap_cuda / softcap_scaled_cuda would; row_stats_open finishes
// them as it reads them. Not open: the logits are final.
struct OpenLogits {
  bool open = false;
  Tensor row_scale;                  // [rows] f32, or empty (not a W8A8 product)
  const float* col_scale = nullptr;  // [vocab] f32 with row_scale
  float cap = 0.0f;
};

struct Precision {
  Storage act = Storage::kF32;  // stored activations (the reference model dtype)
  Storage kv = Storage::kF32;   // KV cache storage
};

// One sequence of Backend::attention_segments: its rows [row0, row0 + rows) of q, out and the fresh K/V (at
// positions pos0..), over the cached positions [cache_from, cache_to) of its cache layer.
struct AttnSegment {
  int64_t row0 = 0, rows = 0, pos0 = 0;
  const KvLayer* kv = nullptr;
  int64_t cache_from = 0, cache_to = 0;
};

// The fresh keys and values of Backend::qkv_heads again in the dtype a backend's dense attention reads fresh rows in,
// written by the same launch (CUDA: f16, as its cache holds keys, so the flash kernels convert nothing). Empty
// tensors: no copy. Passed to attention in place of kn and vn; the cache writes and top-k take kn and vn.
struct FreshKvCopy {
  Tensor k, v;
};

// A linear's input again as E4M3 codes and per-row scales (W8A8), written by the op that produces the input for the
// products that read it next, so that no launch of its own quantises it. Backend::row_codes allocates them where
// the backend's products of the consumer's weights read such codes (empty tensors otherwise: the producer writes
// none); `filled` says the producer wrote them, and a consumer quantises the input itself when it is not set.
struct RowCodes {
  Tensor codes;  // u8 [rows, cols]
  Tensor scale;  // f32 [rows]
  bool filled = false;
};

// A MoE block's routing of its rows, issued ahead of the dense MLP where a backend can (Backend::moe_route_ahead):
// the router's scores, each row's top-k experts and weights, the (row, rank) pairs grouped by expert (counts,
// offsets, perm, inv) and the routing's scratch; held until the block's experts have read them.
struct MoeRouting {
  Tensor r;  // the router's input where the routing computed it (the MoE's inputs were not filled)
  Tensor scores, idx, wts, counts, offsets, perm, inv, scratch;
  bool issued = false;
  // The expert products issued after the routing on its stream (a CUDA backend's moe_experts_ahead): their output
  // rows y and the buffers between the two products, joined with the routing.
  Tensor y, act, act_codes, act_scale;
  bool experts = false;
};

// The W8A8 MoE's inputs, written by the residual chain that makes h1 and z (linear_residual_norms) where a backend
// gave buffers (moe_inputs) and its chain can, and read by its MoE when filled (linear_moe_ffn_tail): the router's
// input of h1 and z's E4M3 rows; and the routing, where moe_route_ahead issued it.
struct MoeInputs {
  Tensor r;  // bf16 [rows, hidden]
  RowCodes z;
  const Tensor* router_scale = nullptr;
  bool filled = false;
  MoeRouting routing;
};

// A decoder layer's input norm (input_layernorm of its residual stream, with its E4M3 rows where its q/k/v products
// read them), which the layer before may write from its feed-forward tail's launch (linear_moe_ffn_tail's `next`,
// where a backend can); `filled` says it did (codes.filled: the codes too), else the layer norms its input itself.
struct InputNorm {
  const Tensor* w = nullptr;  // the layer's input_layernorm weight
  Tensor out;                 // [rows, hidden] in the activation storage
  RowCodes codes;
  bool filled = false;
};

// What reads a weight: only products (linears, the experts' grouped GEMMs) may take packed formats.
enum class WeightUse : uint8_t { kPlain, kLinear, kExperts };

// The sampler's per-step decisions where the model runs (src/ops/decide/decide.h): the canvas ids, the last step's
// row statistics, the RNG and the stop state stay on the backend, and each step hands the host one DecideStatus.
class Decider {
 public:
  virtual ~Decider() = default;
  // Starts an attempt: its initial canvas goes into ids(); lcg is the RNG state after the canvas draws; jump holds
  // the LCG's maps of 1..2 * rows draws (Lcg::jumps).
  virtual void start(const DecideParams& p, std::span<const int32_t> canvas, uint64_t lcg,
                     std::span<const LcgJump> jump) = 0;
  // [rows] i32: the canvas the next denoise reads; each step rewrites it in place (a captured graph's input).
  virtual const Tensor& ids() const = 0;
  // After a denoise wrote `logits` [rows, vocab] f32: the row statistics of softmax(logits / T) (the tempered
  // logits to `tempered`, as Backend::row_stats), the categorical draws where p.categorical, then the decisions.
  virtual DecideStatus step(const Tensor& logits, float temperature, Tensor& tempered) = 0;
  // The same from logits an lm_head_open left open (Backend::row_stats_open finishes them as they are read; stored
  // back finished where this step's draws read them, else left open). By default: refuses logits left open.
  virtual DecideStatus step_open(Tensor& logits, const OpenLogits& open, float temperature, Tensor& tempered);
  // The last step's row statistics and the canvas, on the host.
  virtual void read_stats(RowStats* host) = 0;
  virtual void read_canvas(int32_t* host) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Precision precision() const = 0;

  // [rows, cols] activation buffer in the backend's activation dtype (f32 values on the CPU backend).
  virtual Tensor alloc(Shape s) = 0;
  // An f32 buffer (logits).
  virtual Tensor alloc_f32(Shape s) = 0;
  // Throws dg::Error naming `what` when this backend cannot run the weight `host` as `use` (a packed format without
  // a kernel, an input width its kernel cannot tile); model uploads check every weight before copying the first.
  virtual void check_weight(const Tensor& host, WeightUse use, const std::string& what) const;
  // A weight as this backend reads it (a device copy on a GPU, bf16 or the packed planes as stored; the same view
  // on the CPU).
  virtual Tensor upload(const Tensor& host) = 0;
  // Stores uploaded weights that share an input side by side, in order, so linears() and gated_linear() may run
  // them as one product; backends without fused products leave them as they are.
  virtual void place_side_by_side(std::span<Tensor* const> group) { (void)group; }
  virtual Tensor ids(std::span<const int32_t> ids) = 0;
  virtual void copy_to_host(const Tensor& t, float* dst) = 0;
  virtual void copy_from_host(const float* src, Tensor& t) = 0;

  virtual void embed(const Tensor& ids, const Tensor& table, Tensor& out) = 0;
  virtual void rmsnorm(const Tensor& x, const Tensor* w, Tensor& out) = 0;  // over the last dim; w null: no scale
  // RowCodes for x (a linear's input) when the backend's products of w read E4M3 rows; empty otherwise (the default).
  virtual RowCodes row_codes(const Tensor& x, std::span<const Tensor* const> w);
  // rmsnorm(), and out's RowCodes when `codes` holds buffers and the backend writes them in the same pass (default:
  // rmsnorm() alone, codes left unfilled).
  virtual void rmsnorm_codes(const Tensor& x, const Tensor* w, Tensor& out, RowCodes& codes);
  // MoeInputs buffers for z's rows where this backend's MoE of w reads E4M3 rows and its residual chain writes
  // them; empty otherwise (the default).
  virtual MoeInputs moe_inputs(const Tensor& z, const MoeWeights& w);
  // The MoE block's routing of h's rows (the residual the router reads; in.r when `in` is filled) issued now, where
  // the backend can run it beside the work issued before the block's experts (the dense MLP); in.routing.issued says
  // it did, and the block's MoE (moe_ffn_tail, linear_moe_ffn_tail given `in`) takes it. Default: nothing (the MoE
  // routes its rows itself).
  virtual void moe_route_ahead(const Tensor& h, const MoeWeights& w, int top_k, MoeInputs& in);
  // How many producer launches have filled RowCodes on this backend since it was made, counted as they are issued (a
  // captured graph's replays add none; 0 for a backend that fills none): what tests read to know a path wrote them.
  virtual uint64_t row_codes_filled() const { return 0; }
  // How many feed-forward tails have written the next layer's input norm (InputNorm) on this backend, counted as
  // issued (0 for a backend that writes none): what tests read to know the path ran.
  virtual uint64_t input_norms_filled() const { return 0; }
  // How many MoE routings this backend has issued ahead (moe_route_ahead), counted as issued; 0 for one that never
  // does.
  virtual uint64_t routes_ahead() const { return 0; }
  // How many of those routings took the expert products with them (a CUDA backend's moe_experts_ahead).
  virtual uint64_t experts_ahead() const { return 0; }
  // How many W8A8 products this backend has issued through its own few-rows kernel instead of a library's (the CUDA
  // backend's A8RowsMode), counted as issued; 0 for a backend without one: what tests read to know the kernel ran.
  virtual uint64_t own_e4m3_products() const { return 0; }
  virtual void linear(const Tensor& x, const Tensor& w, Tensor& out) = 0;
  virtual void rope(Tensor& x, int64_t pos0, const std::vector<float>& inv_freq) = 0;  // x: [rows, heads, D]
  // rope() of each span's rows [row0, row0 + rows) at positions pos0 + (row - row0): the several sequences of a
  // batched step, which a backend may rotate in one launch (the same values as rope() per span).
  virtual void rope_spans(Tensor& x, std::span<const RopeSpan> spans, const std::vector<float>& inv_freq);
  virtual void add(const Tensor& a, const Tensor& b, Tensor& out) = 0;
  virtual void scale(Tensor& x, float s) = 0;
  virtual void gelu_mul(const Tensor& gate, const Tensor& up, Tensor& out) = 0;
  // Linears that share an input (q/k/v): out[i] = x w[i]^T as linear() computes them; a backend may run them as one
  // product over weights it stores side by side (same products, summation order aside). Null entries are skipped.
  virtual void linears(const Tensor& x, std::span<const Tensor* const> w, std::span<Tensor* const> out);
  // out = gelu_mul(x gate^T, x up^T): the first half of the dense and self-conditioning MLPs, likewise. x_codes: x's
  // RowCodes when filled (or null); out_codes: out's, which a backend may fill (or null).
  virtual void gated_linear(const Tensor& x, const Tensor& gate, const Tensor& up, Tensor& out,
                            const RowCodes* x_codes = nullptr, RowCodes* out_codes = nullptr);
  // The residual chains of src/ops/residual/residual.h; the defaults are their compositions of rmsnorm, add and
  // scale (attn, m1 and m2 may be overwritten). residual_norms: h1 = h + rmsnorm(attn) w_post, out[i] =
  // rmsnorm(h1) w[i] (w[i] null: no scale). ffn_tail: out = (h1 + rmsnorm(rmsnorm(m1) w1 + rmsnorm(m2) w2) w) s
  // (s: RowScalar, one scalar for the rows before its split and another after).
  virtual void residual_norms(const Tensor& h, Tensor& attn, const Tensor& w_post, Tensor& h1,
                              std::span<const Tensor* const> w, std::span<Tensor* const> out);
  virtual void ffn_tail(const Tensor& h1, Tensor& m1, const Tensor& w1, Tensor& m2, const Tensor& w2, const Tensor& w,
                        RowScalar s, Tensor& out);
  // residual_norms of attn = x w_o^T (the attention's output projection): the default is linear(), then
  // residual_norms(). A backend may apply a W8A8 product's scales as the chain reads its raw sums.
  // out0_codes: out[0]'s RowCodes, which a backend may fill (or null); moe_in: the MoE's inputs of h1 and out[1]
  // (z), likewise.
  virtual void linear_residual_norms(const Tensor& x, const Tensor& w_o, const Tensor& h, const Tensor& w_post,
                                     Tensor& h1, std::span<const Tensor* const> w, std::span<Tensor* const> out,
                                     RowCodes* out0_codes = nullptr, MoeInputs* moe_in = nullptr);
  // out = rope(rmsnorm(x) w) at positions pos0..: the per-head norm and rotation of q and k (default: the two ops).
  virtual void rmsnorm_rope(const Tensor& x, const Tensor* w, Tensor& out, int64_t pos0,
                            const std::vector<float>& inv_freq);
  // The attention block's heads from its normed input a: the products of w = {q, k, v} (q null: k and v only, as
  // the encoder's last layer; v null: V is the raw K product, as the full layers take it), each head row RMS-normed
  // (q and k by q_norm and k_norm, v unscaled), q and k rotated at each span's positions (spans: the sequences'
  // rows, in order). qn [rows, n_heads, D] (null with w[0]), kn and vn [rows, n_kv, D]. The default composes
  // linears, rmsnorm_rope (one span) or rmsnorm and rope_spans, and rmsnorm, and leaves `copy` empty. A backend may
  // fill `copy` (when not null) with kn and vn in the dtype its dense attention reads fresh rows in (FreshKvCopy).
  virtual void qkv_heads(const Tensor& a, std::span<const Tensor* const> w, const Tensor* q_norm,
                         const Tensor& k_norm, std::span<const RopeSpan> spans, const std::vector<float>& inv_freq,
                         Tensor* qn, Tensor& kn, Tensor& vn, FreshKvCopy* copy, const RowCodes* a_codes = nullptr);

  // Attention of q [rows, n_heads, D] at positions q_pos0.. over the cached positions [cache_from, cache_to) of a
  // cache layer followed by fresh K/V rows at positions fresh_pos0.. . out: [rows, n_heads * D]. k_fresh and v_fresh
  // are as qkv_heads wrote kn and vn, or (attention and attention_segments) rows of the FreshKvCopy it filled.
  virtual void attention(const Tensor& q, int64_t q_pos0, const KvLayer& kv, int64_t cache_from, int64_t cache_to,
                         const Tensor& k_fresh, const Tensor& v_fresh, int64_t fresh_pos0, bool causal,
                         int64_t window, Tensor& out) = 0;
  // Top-k sparse attention (src/ops/attention/attention_topk.h): attention() where each (query row, head) keeps
  // only topk.keep(visible) of the keys it sees. The default runs attention() for topk off and refuses otherwise,
  // naming the backend.
  virtual void attention_topk(const Tensor& q, int64_t q_pos0, const KvLayer& kv, int64_t cache_from,
                              int64_t cache_to, const Tensor& k_fresh, const Tensor& v_fresh, int64_t fresh_pos0,
                              bool causal, int64_t window, const AttnTopk& topk, Tensor& out);
  // attention() for several sequences at once (a batched denoise step: each sequence's rows see its own cache and
  // its own fresh rows). The default runs attention() per sequence.
  virtual void attention_segments(const Tensor& q, std::span<const AttnSegment> segs, const Tensor& k_fresh,
                                  const Tensor& v_fresh, bool causal, int64_t window, Tensor& out);
  // Stores K/V rows [n, n_kv, D] for positions pos0.. in a cache layer (KvCache::prepare_write made room).
  virtual void kv_write(const KvLayer& kv, int64_t pos0, const Tensor& k, const Tensor& v) = 0;

  // Mixture of experts: routing reads the raw residual h, the experts read z = pre_feedforward_layernorm_2(h).
  virtual void moe(const Tensor& h, const Tensor& z, const MoeWeights& w, int top_k, Tensor& out) = 0;
  // The MoE block feeding the feed-forward tail: out = ffn_tail(h, m1, w1, moe(h, z, w, top_k), w2, wn, s) (m1 may be
  // overwritten). The default is the two ops; a backend may skip storing the MoE's output (CUDA combines the
  // experts' rows inside the tail's kernel). moe_in: the MoE's inputs (their routing where issued ahead), or null;
  // next: the next layer's input norm of out, which a backend may fill (the default does not; or null).
  virtual void moe_ffn_tail(const Tensor& h, const Tensor& z, const MoeWeights& w, int top_k, Tensor& m1,
                            const Tensor& w1, const Tensor& w2, const Tensor& wn, RowScalar s, Tensor& out,
                            const MoeInputs* moe_in = nullptr, InputNorm* next = nullptr);
  // moe_ffn_tail of m1 = x w_down^T (the dense MLP's down projection): the default is linear(), the stage mark
  // "moe", then moe_ffn_tail(); a backend may apply a W8A8 product's scales as the tail reads its raw sums. x_codes:
  // x's RowCodes when filled (or null); moe_in: the MoE's inputs when filled (or null); next: as moe_ffn_tail's.
  virtual void linear_moe_ffn_tail(const Tensor& x, const Tensor& w_down, const Tensor& h, const Tensor& z,
                                   const MoeWeights& w, int top_k, const Tensor& w1, const Tensor& w2,
                                   const Tensor& wn, RowScalar s, Tensor& out, const RowCodes* x_codes = nullptr,
                                   const MoeInputs* moe_in = nullptr, InputNorm* next = nullptr);
  // logits f32. An fp8 `embed` (fp8_table) makes it a W8A8 product: y's rows quantised per row to E4M3 first.
  virtual void lm_head(const Tensor& y, const Tensor& embed, float softcap, Tensor& logits) = 0;
  // lm_head that may leave its last elementwise step to row_stats_open (batched steps, whose statistics read every
  // logit anyway): the logits hold what OpenLogits says. By default lm_head, nothing left open.
  // row_scale: where a W8A8 product's input-row scales go ([rows] f32, allocated before a graph capture; null: the
  // backend allocates them).
  [[nodiscard]] virtual OpenLogits lm_head_open(const Tensor& y, const Tensor& embed, float softcap, Tensor& logits,
                                                Tensor* row_scale = nullptr);
  // Whether a single sequence's steps take lm_head_open (ModelDenoiser): false by default.
  virtual bool open_single_logits() const { return false; }
  // Finishes logits an lm_head_open left open (rows [row0, ...) of its result), in place, as the softcap pass would.
  // By default: refuses logits left open.
  virtual void finish_logits(Tensor& logits, const OpenLogits& open, int64_t row0);
  // The tied table [vocab, hidden] (a weight of this backend) as fp8 rows: E4M3 codes with a per-row f32 scale, the
  // pack's fp8 format (encode_rows), for lm_head (--vocab-act fp8); `transpose`: its transpose [hidden, vocab] as
  // fp8 rows, for soft_embed. By default an error naming the backend.
  virtual Tensor fp8_table(const Tensor& table, bool transpose);
  // Soft embedding of processed logits [rows, vocab] (self-conditioning); sparse_cutoff 0 = exact. An fp8 `embed`
  // (fp8_table's transpose [hidden, vocab]): W8A8, the probabilities quantised per row to E4M3. `rows`: the bf16
  // table [vocab, hidden] (or null), whose survivors' rows a backend may sum instead of the product over the whole
  // vocabulary when sparse_cutoff > 0 (CudaKernels::sc_survivors; its twin is the sum over `rows`).
  virtual void soft_embed(const Tensor& sc_logits, const Tensor& embed, float sparse_cutoff, Tensor& out,
                          const Tensor* rows) = 0;
  // The soft embeddings of several inputs at once (a batched step's canvases): soft_embed on each. A backend may
  // overlap them (CUDA: the survivor paths' overflow checks read together, one host synchronisation for all).
  struct SoftEmbedJob {
    const Tensor* sc_logits = nullptr;
    float sparse_cutoff = 0.0f;
    Tensor* out = nullptr;
  };
  virtual void soft_embeds(std::span<const SoftEmbedJob> jobs, const Tensor& embed, const Tensor* rows) {
    for (const SoftEmbedJob& j : jobs) soft_embed(*j.sc_logits, embed, j.sparse_cutoff, *j.out, rows);
  }

  // [rows, vocab] for the tempered logits row_stats writes and the next step's soft_embed reads, in the activation
  // storage (default: alloc()). A backend that rounds f32 activations to 16 bits may store them in 16 bits, which
  // hold the rounded values exactly.
  virtual Tensor alloc_tempered(Shape s) { return alloc(s); }
  // Sampler row statistics of softmax(logits / temperature) to the host, and the tempered logits in the
  // activation storage (the next step's self-conditioning input; `tempered` from alloc_tempered or alloc).
  virtual void row_stats(const Tensor& logits, float temperature, Tensor& tempered, RowStats* host_stats) = 0;
  // row_stats of rows [row0, row0 + rows of `logits`) of an lm_head_open result (`logits` those rows), finishing
  // each logit as it is read; with `finish`, the finished logits stored back (a draw or another reader follows).
  // The same statistics and tempered logits as row_stats of the finished logits. By default: row_stats, refusing
  // logits left open (a backend that leaves them open finishes them).
  virtual void row_stats_open(Tensor& logits, const OpenLogits& open, int64_t row0, float temperature,
                              Tensor& tempered, RowStats* host_stats, bool finish);
  // Inverse-CDF categorical draws from softmax(logits / temperature), one uniform per row; ids to the host.
  virtual void categorical(const Tensor& logits, float temperature, std::span<const double> u, int32_t* host_ids) = 0;

  // A Decider on this backend; nullptr where the decisions stay on the host.
  virtual std::unique_ptr<Decider> make_decider() { return nullptr; }

  // Stage marks for the per-stage time breakdown: time from one mark to the next is charged to the first mark's
  // stage. No-ops unless profiling is on.
  virtual void set_profiling(bool on) { (void)on; }
  virtual void stage(const char* name) { (void)name; }
  // Accumulated milliseconds per stage since the last call (synchronises).
  virtual std::vector<std::pair<std::string, double>> take_stage_times() { return {}; }
  virtual std::string device_name() const { return "cpu"; }
  // Opens (true) or closes the range an external profiler records (CUDA: cudaProfilerStart/Stop); a no-op elsewhere.
  virtual void profiler_range(bool on) { (void)on; }
  virtual size_t peak_memory() const { return 0; }  // bytes of device memory held at the high-water mark
  // Memory this backend's buffers come from, free now and in total (the host's by default; a GPU's own).
  virtual MemoryInfo memory_info() const { return host_memory(); }

  // Graphs: the ops issued between capture_begin() and capture_end() are recorded, not run; launch_captured()
  // replays the last capture (CUDA graphs). Inputs that change between replays must live in buffers filled
  // outside the capture (ids_into). Backends without graphs answer can_capture() false.
  virtual bool can_capture() const { return false; }
  virtual void capture_begin() { fail_no_graphs(); }
  virtual void capture_end() { fail_no_graphs(); }
  virtual void launch_captured() { fail_no_graphs(); }
  // How many captures have ended on this backend: a caller whose graph another caller's capture replaced since
  // (the backend keeps one) captures again.
  virtual uint64_t captures() const { return 0; }
  virtual GraphStats graph_stats() const { return {}; }
  // Copies host ids into an existing ids tensor (same length) of this backend.
  virtual void ids_into(std::span<const int32_t> ids, Tensor& dst) { dst = this->ids(ids); }

  // Sets where and how a KV cache for `context` tokens is stored on this backend.
  virtual void configure_kv(KvOptions& o, int64_t context) = 0;
  // Waits for all queued work (timing, before reading results outside the backend).
  virtual void synchronize() = 0;

 private:
  [[noreturn]] void fail_no_graphs() const;
};

}  // namespace dg
