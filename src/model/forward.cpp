#include "model/forward.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/error.h"
#include "model/forward_names.h"

namespace dg {
namespace {

void emit(const ForwardTrace* trace, const std::string& name, const Tensor& t) {
  if (trace != nullptr && *trace) (*trace)(name, t);
}

}  // namespace

Model::Model(const ModelConfig& cfg, const ModelWeights& w, Backend& be) : cfg_(cfg), w_(w), be_(be) {
  for (int l = 0; l < cfg.n_layers; ++l) inv_freq_.push_back(cfg.rope_inv_freq(l));
}

void Model::check_ids(std::span<const int32_t> ids, const char* what) const {
  for (size_t i = 0; i < ids.size(); ++i)
    DG_CHECK(ids[i] >= 0 && ids[i] < cfg_.vocab, "{} token {} at position {} is outside the vocabulary [0, {})", what,
             ids[i], i, cfg_.vocab);
}

void Model::check_positions(int64_t end, const char* what) const {
  DG_CHECK(cfg_.max_positions <= 0 || end <= cfg_.max_positions,
           "the {} would reach position {}, beyond the {} positions the model takes (max_position_embeddings in "
           "config.json)",
           what, end, cfg_.max_positions);
}

Tensor Model::layer(int l, const Tensor& h, int64_t pos0, Phase phase, KvCache* kv_out, const KvCache& kv,
                    bool kv_only, const ForwardTrace* trace, InputNorm* norm) const {
  const Segment seg{0, h.shape[0], pos0, &kv, kv_out};
  return layer(l, h, std::span<const Segment>(&seg, 1), phase, kv_only, trace, norm);
}

InputNorm Model::input_norm_buffers(int l, const Tensor& x) const {
  const LayerWeights& w = w_.layers[static_cast<size_t>(l)];
  const Tensor* ws[] = {&w.q, &w.k, cfg_.layers[static_cast<size_t>(l)].sliding ? &w.v : nullptr};
  InputNorm n{&w.input_norm, be_.alloc(x.shape), {}, false};
  n.codes = be_.row_codes(n.out, ws);
  return n;
}

Tensor Model::layer(int l, const Tensor& h, std::span<const Segment> segs, Phase phase, bool kv_only,
                    const ForwardTrace* trace, InputNorm* norm) const {
  DG_CHECK(!segs.empty(), "layer: no sequences");
  const LayerSpec& spec = cfg_.layers[static_cast<size_t>(l)];
  const LayerWeights& w = w_.layers[static_cast<size_t>(l)];
  const int64_t rows = h.shape[0], hidden = cfg_.hidden, D = spec.head_dim;
  const int64_t n_heads = cfg_.n_heads, n_kv = spec.n_kv_heads;
  DG_CHECK(phase != Phase::kMixed || trace == nullptr || !*trace, "layer: a traced forward is of one phase");
  const std::string p = layer_prefix(phase == Phase::kEncode, l);
  const std::vector<float>& inv_freq = inv_freq_[static_cast<size_t>(l)];

  // Attention block: q/k/v projections, per-head norms, RoPE; full layers take V from the raw K projection.
  be_.stage("attention");
  const Tensor* ws[] = {kv_only ? nullptr : &w.q, &w.k, spec.sliding ? &w.v : nullptr};
  const bool traced = trace != nullptr && *trace;
  if (traced) norm = nullptr;
  // Untraced, the input norm may also write a's E4M3 rows for W8A8 q/k/v products (RowCodes); the layer before
  // may have written both (norm filled), or given the buffers.
  const bool carried = norm != nullptr && norm->w == &w.input_norm && norm->out.numel() == rows * hidden;
  Tensor a = carried ? norm->out : be_.alloc(Shape{rows, hidden});
  RowCodes aq = carried ? norm->codes : traced ? RowCodes{} : be_.row_codes(a, ws);
  if (!carried || !norm->filled) be_.rmsnorm_codes(h, &w.input_norm, a, aq);
  emit(trace, p + "input_layernorm", a);
  std::vector<RopeSpan> spans;  // each sequence's rows at its own positions
  for (const Segment& sg : segs) spans.push_back(RopeSpan{sg.row0, sg.rows, sg.pos0});
  Tensor kn = be_.alloc(Shape{rows, n_kv, D}), vn = be_.alloc(Shape{rows, n_kv, D}), qn;
  FreshKvCopy fresh;  // kn and vn in the dense attention's dtype, when the backend writes them (qkv_heads)
  const bool topk = !spec.sliding && attn_topk_.on();  // top-k attention reads kn and vn: no copy
  if (!kv_only) qn = be_.alloc(Shape{rows, n_heads, D});
  if (!traced) {
    // Products, per-head norms and rotations as one op (a backend may fuse them).
    be_.qkv_heads(a, ws, kv_only ? nullptr : &w.q_norm, w.k_norm, spans, inv_freq, kv_only ? nullptr : &qn, kn, vn,
                  kv_only || topk ? nullptr : &fresh, &aq);
  } else {
    // Op by op, each intermediate emitted.
    Tensor k = be_.alloc(Shape{rows, n_kv * D}), v = k, q;
    if (spec.sliding) v = be_.alloc(Shape{rows, n_kv * D});
    if (!kv_only) q = be_.alloc(Shape{rows, n_heads * D});
    Tensor* outs[] = {&q, &k, &v};
    be_.linears(a, ws, outs);
    emit(trace, p + "self_attn.k_proj", k);
    if (spec.sliding) emit(trace, p + "self_attn.v_proj", v);
    be_.rmsnorm(k.reshaped(Shape{rows, n_kv, D}), &w.k_norm, kn);
    emit(trace, p + "self_attn.k_norm", kn);
    be_.rope_spans(kn, spans, inv_freq);
    be_.rmsnorm(v.reshaped(Shape{rows, n_kv, D}), nullptr, vn);
    emit(trace, p + "self_attn.v_norm", vn);
    if (!kv_only) {
      emit(trace, p + "self_attn.q_proj", q);
      be_.rmsnorm(q.reshaped(Shape{rows, n_heads, D}), &w.q_norm, qn);
      emit(trace, p + "self_attn.q_norm", qn);
      be_.rope_spans(qn, spans, inv_freq);
    }
  }

  // Each sequence appends its rows to its own cache (encoder).
  const auto kv_write = [&] {
    for (const Segment& sg : segs)
      if (sg.write != nullptr)
        be_.kv_write(sg.write->prepare_write(l, sg.pos0, sg.rows), sg.pos0, row_slice(kn, sg.row0, sg.rows),
                     row_slice(vn, sg.row0, sg.rows));
  };
  if (kv_only) {
    kv_write();
    if (norm != nullptr) *norm = InputNorm{};
    return h;
  }
  Tensor o = be_.alloc(Shape{rows, n_heads * D});
  // What the attention sees of the cache (SPEC.md §2.8): full layers every cached token before the sequence's rows;
  // sliding layers the window before the first row (the causal window mask does the rest) for the encoder, and the
  // last window-1 tokens before the canvas for every canvas row in the decoder. Dense attention takes every
  // sequence of one phase in one call (a batched step: one launch on the GPU); full layers with top-k take one call
  // per sequence. In a mixed forward the encoder's rows attend first, their K/V go to the caches, then the decoder's
  // rows attend: a canvas that follows a block encoded in this forward sees it as cached.
  const auto attend = [&](bool encoder) {
    const bool causal = encoder;
    const int64_t window = spec.sliding && causal ? cfg_.window : 0;
    std::vector<KvLayer> layers;
    std::vector<AttnSegment> parts;
    layers.reserve(segs.size());
    for (const Segment& sg : segs) {
      if (encodes(sg, phase) != encoder) continue;
      Tensor q_part = row_slice(qn, sg.row0, sg.rows);
      const KvCache& kv = *sg.kv;
      const int64_t len = sg.pos0;  // the cached positions before the rows
      int64_t cache_from = 0;
      if (spec.sliding) cache_from = std::max<int64_t>({0, len - (cfg_.window - 1), kv.oldest(l)});
      layers.push_back(kv.layer(l));
      if (!topk) {
        parts.push_back(AttnSegment{sg.row0, sg.rows, sg.pos0, &layers.back(), cache_from, len});
        continue;
      }
      Tensor o_part = row_slice(o, sg.row0, sg.rows);
      be_.stage("attention_core");  // the attention kernel alone; projections and norms stay in "attention"
      be_.attention_topk(q_part, sg.pos0, layers.back(), cache_from, len, row_slice(kn, sg.row0, sg.rows),
                         row_slice(vn, sg.row0, sg.rows), sg.pos0, causal, window, attn_topk_, o_part);
      be_.stage("attention");
    }
    if (parts.empty()) return;
    be_.stage("attention_core");
    const Tensor& kf = fresh.k.data != nullptr ? fresh.k : kn;
    const Tensor& vf = fresh.v.data != nullptr ? fresh.v : vn;
    if (parts.size() == 1) {
      const AttnSegment& g = parts[0];
      Tensor o_part = row_slice(o, g.row0, g.rows);
      be_.attention(row_slice(qn, g.row0, g.rows), g.pos0, *g.kv, g.cache_from, g.cache_to,
                    row_slice(kf, g.row0, g.rows), row_slice(vf, g.row0, g.rows), g.pos0, causal, window, o_part);
    } else {
      be_.attention_segments(qn, parts, kf, vf, causal, window, o);
    }
    be_.stage("attention");
  };
  if (phase == Phase::kMixed) {
    attend(true);
    kv_write();
    attend(false);
  } else {
    attend(phase == Phase::kEncode);
    kv_write();
  }
  // A traced forward issues the products and the residual chains op by op, so every intermediate has its name;
  // otherwise each chain is one op with the product that feeds it (linear_residual_norms, linear_moe_ffn_tail: the
  // same composition, src/ops/residual/residual.h).
  Tensor h1 = be_.alloc(Shape{rows, hidden}), u = be_.alloc(Shape{rows, hidden}), z = be_.alloc(Shape{rows, hidden});
  RowCodes uq, gq;  // untraced: u's and the dense MLP's gated output's E4M3 rows, written by their producers
  MoeInputs mi;     // untraced: the MoE's router input and z's E4M3 rows, where the backend's chain writes them
  if (traced) {
    Tensor attn = be_.alloc(Shape{rows, hidden});
    be_.linear(o, w.o, attn);
    emit(trace, p + "self_attn.o_proj", attn);
    be_.rmsnorm(attn, &w.post_attn_norm, attn);
    emit(trace, p + "post_attention_layernorm", attn);
    be_.add(h, attn, h1);
    be_.rmsnorm(h1, &w.pre_ff_norm, u);
    emit(trace, p + "pre_feedforward_layernorm", u);
    be_.rmsnorm(h1, &w.pre_ff_norm_2, z);
    emit(trace, p + "pre_feedforward_layernorm_2", z);
  } else {
    const Tensor* norms[] = {&w.pre_ff_norm, &w.pre_ff_norm_2};
    Tensor* normed[] = {&u, &z};
    const Tensor* gu[] = {&w.gate, &w.up};
    uq = be_.row_codes(u, gu);
    mi = be_.moe_inputs(z, w.moe());
    be_.linear_residual_norms(o, w.o, h, w.post_attn_norm, h1, norms, normed, &uq, &mi);
    be_.moe_route_ahead(h1, w.moe(), cfg_.top_k, mi);  // may run beside the dense MLP
  }

  // Feed-forward: the dense MLP (on u) and the MoE (router on h1, experts on z) both read the residual h1.
  be_.stage("dense_mlp");
  Tensor gate = be_.alloc(Shape{rows, cfg_.intermediate});
  if (!traced) {
    const Tensor* dn[] = {&w.down};
    gq = be_.row_codes(gate, dn);
  }
  be_.gated_linear(u, w.gate, w.up, gate, &uq, &gq);
  // layer_scalar multiplies the whole residual stream; the encoder has its own scalars (SPEC.md §2.6).
  // A mixed forward's encoder rows come first (mixed_rows): theirs for rows before the split, the decoder's after.
  RowScalar scalar(phase == Phase::kEncode ? w.encoder_scalar : w.decoder_scalar);
  if (phase == Phase::kMixed) scalar = RowScalar(w.encoder_scalar, encoder_rows(segs), w.decoder_scalar);
  Tensor out = be_.alloc(Shape{rows, hidden});
  if (norm != nullptr) *norm = l + 1 < cfg_.n_layers ? input_norm_buffers(l + 1, out) : InputNorm{};
  if (!traced) {  // down, the MoE and the tail as one op: the backend may never store the MoE's output, and may
                  // write the next layer's input norm
    InputNorm* next = norm != nullptr && norm->w != nullptr ? norm : nullptr;
    be_.linear_moe_ffn_tail(gate, w.down, h1, z, w.moe(), cfg_.top_k, w.post_ff_norm_1, w.post_ff_norm_2,
                            w.post_ff_norm, scalar, out, &gq, &mi, next);
  } else {
    Tensor m1 = be_.alloc(Shape{rows, hidden});
    be_.linear(gate, w.down, m1);
    emit(trace, p + "mlp", m1);
    be_.stage("moe");
    Tensor m2 = be_.alloc(Shape{rows, hidden});
    be_.moe(h1, z, w.moe(), cfg_.top_k, m2);
    emit(trace, p + "experts", m2);
    be_.rmsnorm(m1, &w.post_ff_norm_1, m1);
    emit(trace, p + "post_feedforward_layernorm_1", m1);
    be_.rmsnorm(m2, &w.post_ff_norm_2, m2);
    emit(trace, p + "post_feedforward_layernorm_2", m2);
    Tensor f = be_.alloc(Shape{rows, hidden});
    be_.add(m1, m2, f);
    be_.rmsnorm(f, &w.post_ff_norm, f);
    emit(trace, p + "post_feedforward_layernorm", f);
    be_.add(h1, f, out);
    be_.scale(out, scalar.first);
  }
  emit(trace, p + "out", out);
  return out;
}

void Model::set_attention_topk(const AttnTopk& topk) {
  DG_CHECK(topk.mode != AttnTopk::Mode::kFixed || (topk.k >= 1 && topk.k <= kAttnTopkMax),
           "attention top-k: k must be from 1 to {} (got {})", kAttnTopkMax, topk.k);
  attn_topk_ = topk;
}

void Model::set_prefill_chunk(int64_t tokens) {
  DG_CHECK(tokens > 0, "the prefill chunk must be at least 1 token (got {})", tokens);
  prefill_chunk_ = tokens;
}

void Model::encode(KvCache& kv, std::span<const int32_t> ids, const ForwardTrace* trace,
                   const PrefillProgress& progress) const {
  if (ids.empty()) return;
  check_ids(ids, "prompt");
  const auto n = static_cast<int64_t>(ids.size());
  check_positions(kv.len() + n, "context");
  const int64_t chunk = trace != nullptr ? n : prefill_chunk_;
  if (progress) progress(0, n);
  for (int64_t at = 0; at < n; at += chunk) {
    const int64_t len = std::min(chunk, n - at);
    encode_chunk(kv, ids.subspan(static_cast<size_t>(at), static_cast<size_t>(len)), trace);
    if (!progress) continue;
    be_.synchronize();
    progress(at + len, n);
  }
}

void Model::encode_batch(std::span<const EncodeSeq> seqs) const {
  std::vector<Segment> segs;
  std::vector<int32_t> text;
  const int64_t rows = encoder_segments(seqs, segs, text);
  if (segs.empty()) return;
  Tensor h = be_.alloc(Shape{rows, cfg_.hidden});
  encoder_embed(std::move(text), h);
  InputNorm norm;
  for (int l = 0; l < cfg_.n_layers; ++l)
    h = layer(l, h, segs, Phase::kEncode, l == cfg_.n_layers - 1, nullptr, &norm);
  for (const Segment& sg : segs) sg.write->commit(sg.rows);
}

int64_t Model::encoder_segments(std::span<const EncodeSeq> seqs, std::vector<Segment>& segs,
                                std::vector<int32_t>& text) const {
  int64_t rows = 0;
  for (const EncodeSeq& s : seqs) {
    DG_CHECK(s.kv != nullptr, "encode_batch: sequence {} has no cache", segs.size());
    if (s.ids.empty()) continue;
    for (const Segment& sg : segs) DG_CHECK(sg.write != s.kv, "encode_batch: a cache encoded twice in one forward");
    check_ids(s.ids, "prompt");
    const auto n = static_cast<int64_t>(s.ids.size());
    check_positions(s.kv->len() + n, "context");
    segs.push_back(Segment{rows, n, s.kv->len(), s.kv, s.kv});
    text.insert(text.end(), s.ids.begin(), s.ids.end());
    rows += n;
  }
  return rows;
}

void Model::encoder_embed(std::vector<int32_t> ids, Tensor& h) const {
  // The encoder embeds image-token ids as pad (there is no vision input in a text engine).
  for (int32_t& id : ids)
    if (id == cfg_.image_token_id) id = cfg_.pad_id;
  be_.stage("embed");
  be_.embed(be_.ids(ids), w_.embed, h);
}

void Model::encode_chunk(KvCache& kv, std::span<const int32_t> ids, const ForwardTrace* trace) const {
  const int64_t rows = static_cast<int64_t>(ids.size());
  Tensor h = be_.alloc(Shape{rows, cfg_.hidden});
  encoder_embed({ids.begin(), ids.end()}, h);
  emit(trace, "enc.embed", h);
  const int64_t pos0 = kv.len();
  const bool want_all = trace != nullptr && *trace;
  InputNorm norm;
  for (int l = 0; l < cfg_.n_layers; ++l) {
    const bool kv_only = l == cfg_.n_layers - 1 && !want_all;  // the last layer's output is never read
    h = layer(l, h, pos0, Phase::kEncode, &kv, kv, kv_only, trace, &norm);
  }
  kv.commit(rows);
}

void Model::denoise(const KvCache& kv, std::span<const int32_t> canvas, const ScInput& sc, Tensor& logits,
                    const ForwardTrace* trace) const {
  DG_CHECK(!canvas.empty(), "denoise: empty canvas");
  check_ids(canvas, "canvas");
  denoise_ids(kv, be_.ids(canvas), sc, logits, trace);
}

void Model::denoise_ids(const KvCache& kv, const Tensor& ids, const ScInput& sc, Tensor& logits,
                        const ForwardTrace* trace) const {
  const Tensor y = denoise_rows(kv, ids, sc, logits, trace);
  be_.lm_head(y, lm_head_table(), static_cast<float>(cfg_.softcap), logits);
  emit(trace, "dec.logits", logits);
}

OpenLogits Model::denoise_ids_open(const KvCache& kv, const Tensor& ids, const ScInput& sc, Tensor& logits,
                                   Tensor& row_scale) const {
  const Tensor y = denoise_rows(kv, ids, sc, logits, nullptr);
  return be_.lm_head_open(y, lm_head_table(), static_cast<float>(cfg_.softcap), logits, &row_scale);
}

Tensor Model::denoise_rows(const KvCache& kv, const Tensor& ids, const ScInput& sc, const Tensor& logits,
                           const ForwardTrace* trace) const {
  const int64_t rows = ids.numel();
  DG_CHECK(rows > 0, "denoise: empty canvas");
  check_positions(kv.len() + rows, "canvas");
  DG_CHECK(logits.numel() == rows * cfg_.vocab, "denoise: logits buffer is {} for a [{}, {}] result",
           logits.shape.str(), rows, cfg_.vocab);
  Tensor x = be_.alloc(Shape{rows, cfg_.hidden});
  denoise_input(ids, sc, x, trace);
  InputNorm norm;
  for (int l = 0; l < cfg_.n_layers; ++l)
    x = layer(l, x, kv.len(), Phase::kDecode, nullptr, kv, false, trace, &norm);
  be_.stage("lm_head");
  Tensor y = be_.alloc(Shape{rows, cfg_.hidden});
  be_.rmsnorm(x, &w_.final_norm, y);
  emit(trace, "dec.final_norm", y);
  return y;
}

void Model::check_sc_logits(const ScInput& sc, int64_t rows) const {
  DG_CHECK(sc.logits != nullptr && sc.logits->shape[0] == rows, "denoise: self-conditioning logits missing");
}

void Model::denoise_input(const Tensor& ids, const ScInput& sc, Tensor& x, const ForwardTrace* trace,
                          const Tensor* soft_in) const {
  const int64_t rows = ids.numel();
  be_.stage("embed");
  Tensor e = be_.alloc(Shape{rows, cfg_.hidden});
  be_.embed(ids, w_.embed, e);
  emit(trace, "dec.embed", e);

  // Self-conditioning before layer 0: x0 = rmsnorm_noscale(e + mlp(pre_norm(soft))). A zero soft signal makes
  // the MLP output exactly zero, leaving x0 = rmsnorm_noscale(e).
  if (sc.kind == ScKind::kZero) {
    be_.rmsnorm(e, nullptr, x);
  } else {
    be_.stage("self_conditioning");
    Tensor soft = e;
    if (sc.kind == ScKind::kLogits && soft_in != nullptr) {
      soft = *soft_in;
    } else if (sc.kind == ScKind::kLogits) {
      check_sc_logits(sc, rows);
      soft = be_.alloc(Shape{rows, cfg_.hidden});
      be_.soft_embed(*sc.logits, soft_embed_table(), sc.sparse_cutoff, soft, &w_.embed);
      emit(trace, "dec.sc_soft", soft);
    }
    Tensor n = be_.alloc(Shape{rows, cfg_.hidden});
    be_.rmsnorm(soft, &w_.sc_pre_norm, n);
    Tensor gate = be_.alloc(Shape{rows, cfg_.intermediate});
    be_.gated_linear(n, w_.sc_gate, w_.sc_up, gate);
    Tensor s = be_.alloc(Shape{rows, cfg_.hidden});
    be_.linear(gate, w_.sc_down, s);
    emit(trace, "dec.sc_mlp", s);
    be_.add(e, s, x);
    be_.rmsnorm(x, nullptr, x);
  }
  emit(trace, "dec.x0", x);
}

Tensor Model::denoise_batch(std::span<const DenoiseSeq> seqs) const { return encode_denoise_batch({}, seqs); }

Tensor Model::encode_denoise_batch(std::span<const EncodeSeq> enc, std::span<const DenoiseSeq> dec) const {
  DG_CHECK(!dec.empty(), "denoise_batch: no sequences");
  std::vector<int32_t> all_ids;
  for (size_t i = 0; i < dec.size(); ++i) {
    DG_CHECK(dec[i].kv != nullptr && !dec[i].canvas.empty(),
             "denoise_batch: sequence {} has no cache or an empty canvas", i);
    check_ids(dec[i].canvas, "canvas");
    all_ids.insert(all_ids.end(), dec[i].canvas.begin(), dec[i].canvas.end());
  }
  const Tensor ids = be_.ids(all_ids);
  std::vector<DecodeRows> rows;
  int64_t at = 0;
  for (const DenoiseSeq& s : dec) {
    const auto n = static_cast<int64_t>(s.canvas.size());
    rows.push_back(DecodeRows{s.kv, row_slice(ids, at, n), s.sc});
    at += n;
  }
  return mixed_forward(enc, rows);
}

void Model::commit_denoise_ids(KvCache& kv, std::span<const int32_t> commit, const Tensor& ids, const ScInput& sc,
                               Tensor& logits) const {
  DG_CHECK(ids.numel() > 0, "denoise: empty canvas");
  DG_CHECK(logits.numel() == ids.numel() * cfg_.vocab, "denoise: logits buffer is {} for a [{}, {}] result",
           logits.shape.str(), ids.numel(), cfg_.vocab);
  const EncodeSeq enc{&kv, commit};
  const DecodeRows dec{&kv, ids, sc};
  const Tensor y = mixed_forward(std::span<const EncodeSeq>(&enc, 1), std::span<const DecodeRows>(&dec, 1));
  be_.lm_head(y, lm_head_table(), static_cast<float>(cfg_.softcap), logits);
}

int64_t Model::encoder_rows(std::span<const Segment> segs) {
  int64_t n = 0;
  for (const Segment& sg : segs) {
    if (sg.write == nullptr) break;
    n += sg.rows;
  }
  return n;
}

Tensor Model::mixed_forward(std::span<const EncodeSeq> enc, std::span<const DecodeRows> dec) const {
  std::vector<Segment> segs;
  std::vector<int32_t> text;
  const int64_t enc_rows = encoder_segments(enc, segs, text);
  int64_t rows = enc_rows;
  for (const DecodeRows& d : dec) {
    int64_t pos0 = d.kv->len();  // a canvas follows the ids this forward encodes into its cache
    for (size_t i = 0; i < segs.size() && segs[i].write != nullptr; ++i)
      if (segs[i].write == d.kv) pos0 += segs[i].rows;
    const int64_t n = d.ids.numel();
    DG_CHECK(n > 0, "denoise: empty canvas");
    check_positions(pos0 + n, "canvas");
    segs.push_back(Segment{rows, n, pos0, d.kv});
    rows += n;
  }
  Tensor x = be_.alloc(Shape{rows, cfg_.hidden});
  if (enc_rows > 0) {
    Tensor xe = row_slice(x, 0, enc_rows);
    encoder_embed(std::move(text), xe);
  }
  // The embedding and self-conditioning of the canvases run per sequence: their inputs differ in kind (zero,
  // self-embed, logits). The soft embeddings of those conditioned on logits come first, together
  // (Backend::soft_embeds: on CUDA one host synchronisation for all their survivor paths).
  std::vector<Tensor> soft(dec.size());
  std::vector<Backend::SoftEmbedJob> jobs;
  for (size_t i = 0; i < dec.size(); ++i) {
    if (dec[i].sc.kind != ScKind::kLogits) continue;
    check_sc_logits(dec[i].sc, dec[i].ids.numel());
    soft[i] = be_.alloc(Shape{dec[i].ids.numel(), cfg_.hidden});
    jobs.push_back(Backend::SoftEmbedJob{dec[i].sc.logits, dec[i].sc.sparse_cutoff, &soft[i]});
  }
  if (!jobs.empty()) {
    be_.stage("self_conditioning");
    be_.soft_embeds(jobs, soft_embed_table(), &w_.embed);
  }
  for (size_t i = 0; i < dec.size(); ++i) {
    const Segment& sg = segs[segs.size() - dec.size() + i];
    Tensor xi = row_slice(x, sg.row0, sg.rows);
    denoise_input(dec[i].ids, dec[i].sc, xi, nullptr, soft[i].empty() ? nullptr : &soft[i]);
  }
  const Phase phase = enc_rows > 0 ? Phase::kMixed : Phase::kDecode;
  InputNorm norm;
  for (int l = 0; l < cfg_.n_layers; ++l) x = layer(l, x, segs, phase, false, nullptr, &norm);
  for (const Segment& sg : segs)
    if (sg.write != nullptr) sg.write->commit(sg.rows);
  be_.stage("lm_head");
  Tensor y = be_.alloc(Shape{rows - enc_rows, cfg_.hidden});
  be_.rmsnorm(row_slice(x, enc_rows, rows - enc_rows), &w_.final_norm, y);
  return y;
}

void Model::lm_head_rows(const Tensor& y, Tensor& logits) const {
  begin_lm_head(y, logits);
  be_.lm_head(y, lm_head_table(), static_cast<float>(cfg_.softcap), logits);
}

OpenLogits Model::lm_head_rows_open(const Tensor& y, Tensor& logits) const {
  begin_lm_head(y, logits);
  return be_.lm_head_open(y, lm_head_table(), static_cast<float>(cfg_.softcap), logits);
}

void Model::begin_lm_head(const Tensor& y, const Tensor& logits) const {
  DG_CHECK(logits.numel() == y.shape[0] * cfg_.vocab, "lm_head_rows: logits buffer is {} for a [{}, {}] result",
           logits.shape.str(), y.shape[0], cfg_.vocab);
  be_.stage("lm_head");
}

}  // namespace dg
