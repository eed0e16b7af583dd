// The forward ops of the CUDA backend (cuda_backend_impl.h): norms, rotary embeddings, linears, attention, KV
// writes, MoE and the vocabulary products, each our kernel (src/ops/*/*.cu) or a cuBLAS path, with the Backend's
// composed form where a fused kernel is off or does not cover the shape.
#include <span>
#include <vector>

#include "backend/cuda/attention_heads.h"
#include "backend/cuda/cublas_paths.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/fp8_gemm.h"
#include "backend/cuda/host_check.h"
#include "backend/cuda/moe_path.h"
#include "backend/cuda/packed_linear.h"
#include "backend/cuda/vocab_products.h"
#include "core/error.h"
#include "ops/attention/attention_cuda.h"
#include "ops/elementwise/elementwise.h"
#include "ops/embed/embed_cuda.h"
#include "ops/glu/glu_cuda.h"
#include "ops/residual/residual.h"
#include "ops/rmsnorm/rmsnorm_cuda.h"
#include "ops/rope/rope_cuda.h"

namespace dg {
namespace {

using cuda_host::check;

}  // namespace

void CudaBackend::embed(const Tensor& ids, const Tensor& table, Tensor& out) {
  check(embed_cuda(ids.as<int32_t>(), ids.numel(), table.data, table.shape[1],
                   embed_scale(table.shape[1], Storage::kBF16), out.data, stream_));
}

void CudaBackend::rmsnorm(const Tensor& x, const Tensor* w, Tensor& out) {
  check(rmsnorm_cuda(x.data, DType::kBF16, w ? w->data : nullptr, DType::kBF16, out.data, DType::kBF16,
                     tensor_rows(x), tensor_cols(x), eps_, stream_));
}

RowCodes CudaBackend::row_codes(const Tensor& x, std::span<const Tensor* const> w) {
  if (!kernels_.fused_norms || !kernels_.a8_row_codes || !a8_on_load(blas_ctx(), x, w)) return {};
  return RowCodes{device(DType::kU8, Shape{tensor_rows(x), tensor_cols(x)}),
                  device(DType::kF32, Shape{tensor_rows(x)})};
}

// Where the experts are W8A8 and the residual chain holds z's rows in its vectorised kernel (never with
// --moe-inputs-apart).
MoeInputs CudaBackend::moe_inputs(const Tensor& z, const MoeWeights& w) {
  const int64_t H = tensor_cols(z), T = tensor_rows(z);
  if (!kernels_.fused_norms || !kernels_.moe_inputs_fused || w.act != DType::kFp8 ||
      w.router_scale.dtype != DType::kBF16 || !residual_vec_fits(H, {z.data, w.router_scale.data}))
    return {};
  return MoeInputs{device(DType::kBF16, Shape{T, H}),
                   RowCodes{device(DType::kU8, Shape{T, H}), device(DType::kF32, Shape{T})}, &w.router_scale};
}

// W8A8 experts whose inputs the residual chain did not write compute the router's input with z's codes
// (moe_inputs_fp8_cuda): those route in the MoE's place.
void CudaBackend::moe_route_ahead(const Tensor& h, const MoeWeights& w, int top_k, MoeInputs& in) {
  const int64_t H = tensor_cols(h), T = tensor_rows(h), E = w.router_proj.shape[0];
  if (route_stream_ == nullptr || !kernels_.fused_norms || in.routing.issued || route_pending_ ||
      (w.act == DType::kFp8 && !in.filled))
    return;
  MoeRouting& g = in.routing;  // allocated on the main stream before the fork, freed on it after the join
  if (!in.filled) g.r = device(DType::kBF16, Shape{T, H});
  moe_route_buffers([this](DType t, Shape sh) { return device(t, sh); }, kernels_, route_ticket_, T, E, top_k, g);
  // The expert products after it (moe_experts_ahead): their buffers allocated here too.
  g.experts = kernels_.moe_experts_ahead && in.filled && moe_a8_streams(kernels_, w, T);
  if (g.experts) {
    const int64_t P = T * top_k, ff = w.gate_up.shape[1] / 2;
    g.y = device(DType::kBF16, Shape{P + 16, H});
    g.act = device(DType::kBF16, Shape{P, ff});
    g.act_codes = device(DType::kU8, Shape{P, ff});
    g.act_scale = device(DType::kF32, Shape{P});
  }
  check(cudaEventRecord(route_fork_, stream_), "the routing's fork");
  check(cudaStreamWaitEvent(route_stream_, route_fork_, 0), "the routing's fork");
  if (!in.filled)
    check(moe_router_input_cuda(h.data, w.router_scale.data, g.r.data, T, H, eps_, router_root(H), route_stream_));
  moe_route_rows(route_blas_, route_stream_, kernels_, route_ticket_, in.filled ? in.r : g.r, w, top_k, g);
  if (g.experts) {
    moe_a8_stream_products(kernels_, route_stream_, in.z.codes, in.z.scale, g, w, top_k, false, g.act, g.act_codes,
                           g.act_scale, g.y);
    ++experts_ahead_;
  }
  check(cudaEventRecord(route_join_, route_stream_), "the routing's join");
  g.issued = route_pending_ = true;
  ++routes_ahead_;
}

cudaEvent_t CudaBackend::routed(const MoeInputs* in) const {
  return route_pending_ && in != nullptr && in->routing.issued ? route_join_ : nullptr;
}

void CudaBackend::join_route() {
  if (!route_pending_) return;
  check(cudaStreamWaitEvent(stream_, route_join_, 0), "the routing's join");
  route_pending_ = false;
}

void CudaBackend::rmsnorm_codes(const Tensor& x, const Tensor* w, Tensor& out, RowCodes& codes) {
  codes.filled = codes_wanted(&codes, out) && w != nullptr && w->dtype == DType::kBF16 &&
                 rmsnorm_codes_fits(x.data, w->data, out.data, codes.codes.data, tensor_cols(x));
  if (!codes.filled) {
    rmsnorm(x, w, out);
    return;
  }
  check(rmsnorm_codes_cuda(x.data, w->data, out.data, tensor_rows(x), tensor_cols(x), eps_, codes.codes.data,
                           codes.scale.f32(), stream_));
  ++row_codes_filled_;
}

void CudaBackend::linear(const Tensor& x, const Tensor& w, Tensor& out) {
  if (dtype_is_packed(w.dtype)) {
    packed_linear_cuda(blas_ctx(), x, tensor_rows(x), tensor_cols(x), w, out, q4_layout());
    return;
  }
  dense_linear_cuda(blas_ctx(), x.data, tensor_rows(x), tensor_cols(x), w.data, w.shape[0], out.data);
}

void CudaBackend::rope(Tensor& x, int64_t pos0, const std::vector<float>& inv_freq) {
  check(rope_cuda(x.data, x.shape[0], x.shape[1], x.shape[2], pos0, device_inv_freq(inv_freq), stream_));
}

void CudaBackend::rope_spans(Tensor& x, std::span<const RopeSpan> spans, const std::vector<float>& inv_freq) {
  check(rope_spans_cuda(x.data, x.shape[0], x.shape[1], x.shape[2], spans.data(), static_cast<int>(spans.size()),
                        device_inv_freq(inv_freq), stream_));
}

void CudaBackend::rmsnorm_rope(const Tensor& x, const Tensor* w, Tensor& out, int64_t pos0,
                               const std::vector<float>& inv_freq) {
  if (!kernels_.fused_norms || x.shape.rank != 3 || x.shape[2] % 16 != 0 || x.shape[2] > 1024) {
    Backend::rmsnorm_rope(x, w, out, pos0, inv_freq);
    return;
  }
  check(rmsnorm_rope_cuda(x.data, w ? w->data : nullptr, out.data, x.shape[0], x.shape[1], x.shape[2], eps_, pos0,
                          device_inv_freq(inv_freq), stream_));
}

void CudaBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  check(add_cuda(a.data, b.data, out.data, out.numel(), stream_));
}

void CudaBackend::scale(Tensor& x, float s) { check(scale_cuda(x.data, s, x.numel(), stream_)); }

void CudaBackend::linears(const Tensor& x, std::span<const Tensor* const> w, std::span<Tensor* const> out) {
  if (!linears_cuda(blas_ctx(), x, w, out)) Backend::linears(x, w, out);
}

void CudaBackend::qkv_heads(const Tensor& a, std::span<const Tensor* const> w, const Tensor* q_norm,
                            const Tensor& k_norm, std::span<const RopeSpan> spans, const std::vector<float>& inv_freq,
                            Tensor* qn, Tensor& kn, Tensor& vn, FreshKvCopy* copy, const RowCodes* a_codes) {
  const auto products = [&](std::span<Tensor* const> outs) { linears(a, w, outs); };
  if (copy != nullptr) *copy = {};
  // The flash kernels read fresh rows as f16: heads_norm writes that copy too, so attention converts nothing.
  const bool f16 = copy != nullptr && flash_for(kn.shape[2]);
  if (!kernels_.fused_norms ||
      !qkv_heads_cuda(blas_ctx(), eps_, device_inv_freq(inv_freq), a, w, q_norm, k_norm, spans, qn, kn, vn,
                      products, a.shape[0] >= kernels_.rope_table_rows, f16 ? copy : nullptr, a_codes))
    Backend::qkv_heads(a, w, q_norm, k_norm, spans, inv_freq, qn, kn, vn, copy);
}

void CudaBackend::gated_linear(const Tensor& x, const Tensor& gate, const Tensor& up, Tensor& out,
                               const RowCodes* x_codes, RowCodes* out_codes) {
  if (!gated_linear_cuda(blas_ctx(), x, gate, up, out, x_codes, out_codes))
    Backend::gated_linear(x, gate, up, out, x_codes, out_codes);
  if (out_codes != nullptr && out_codes->filled) ++row_codes_filled_;
}

void CudaBackend::residual_norms(const Tensor& h, Tensor& attn, const Tensor& w_post, Tensor& h1,
                                 std::span<const Tensor* const> w, std::span<Tensor* const> out) {
  if (!kernels_.fused_norms) {
    Backend::residual_norms(h, attn, w_post, h1, w, out);
    return;
  }
  launch_residual_norms(h, attn, w_post, h1, w, out, {});
}

// residual_norms_cuda over these tensors; `raw`: attn holds a W8A8 product's raw sums and their scales.
void CudaBackend::launch_residual_norms(const Tensor& h, const Tensor& attn, const Tensor& w_post, Tensor& h1,
                                        std::span<const Tensor* const> w, std::span<Tensor* const> out,
                                        RawRowScales raw, RowCodesOut codes0, MoeInputsOut moe) {
  DG_CHECK(w.size() == out.size() && w.size() <= 3, "residual_norms: {} weights for {} outputs", w.size(),
           out.size());
  const void* ws[3] = {};
  void* outs[3] = {};
  for (size_t i = 0; i < w.size(); ++i) {
    ws[i] = w[i] != nullptr ? w[i]->data : nullptr;
    outs[i] = out[i]->data;
  }
  check(residual_norms_cuda(h.data, attn.data, w_post.data, h1.data, ws, outs, static_cast<int>(w.size()),
                            tensor_rows(h), tensor_cols(h), eps_, stream_, raw, codes0, moe));
}

void CudaBackend::ffn_tail(const Tensor& h1, Tensor& m1, const Tensor& w1, Tensor& m2, const Tensor& w2,
                           const Tensor& w, RowScalar s, Tensor& out) {
  if (!kernels_.fused_norms) {
    Backend::ffn_tail(h1, m1, w1, m2, w2, w, s, out);
    return;
  }
  check(ffn_tail_cuda(h1.data, m1.data, w1.data, m2.data, w2.data, w.data, s, out.data, tensor_rows(h1),
                      tensor_cols(h1), eps_, stream_));
}

void CudaBackend::gelu_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  check(gelu_mul_cuda(gate.data, up.data, out.data, gate.numel(), stream_));
}

void CudaBackend::attention(const Tensor& q, int64_t q_pos0, const KvLayer& kv, int64_t cache_from, int64_t cache_to,
                            const Tensor& k_fresh, const Tensor& v_fresh, int64_t fresh_pos0, bool causal,
                            int64_t window, Tensor& out) {
  DG_CHECK(kv.k.device == Device::kCuda, "the CUDA backend needs a device KV cache (EngineCore::new_cache)");
  const CachedKv cached{kv.k.data, kv.v.data, kv.cap, kv.ring, cache_from, cache_to};
  const AttnShape sh{q.shape[1], k_fresh.shape[1], q.shape[2]};
  if (flash_for(sh.head_dim)) {
    const Tensor kf = as_f16(k_fresh), vf = as_f16(v_fresh);
    check(attention_flash_cuda(q.data, q.shape[0], q_pos0, cached, kf.data, vf.data, k_fresh.shape[0], fresh_pos0,
                               sh, causal, window, out.data, stream_, 16, kernels_.attention_cols,
                               kernels_.attention_pairs, wgmma_));
    return;
  }
  DG_CHECK(k_fresh.dtype == DType::kBF16 && v_fresh.dtype == DType::kBF16,
           "attention: fresh rows in {} for a kernel that reads bf16", dtype_name(k_fresh.dtype));
  if (kernels_.attention != AttentionKernel::kWarp) {  // gemm, and flash for head dims it does not cover
    attention_gemm_cublas(blas_ctx(), q, q_pos0, cached, k_fresh, v_fresh, fresh_pos0, causal, window, out);
    return;
  }
  check(attention_cuda(q.data, q.shape[0], q_pos0, cached, k_fresh.data, v_fresh.data, k_fresh.shape[0], fresh_pos0,
                       sh, causal, window, out.data, stream_));
}

void CudaBackend::attention_segments(const Tensor& q, std::span<const AttnSegment> segs, const Tensor& k_fresh,
                                     const Tensor& v_fresh, bool causal, int64_t window, Tensor& out) {
  const AttnShape sh{q.shape[1], k_fresh.shape[1], q.shape[2]};
  std::vector<FlashSegment> fs;
  fs.reserve(segs.size());
  for (const AttnSegment& g : segs) {
    DG_CHECK(g.kv->k.device == Device::kCuda, "the CUDA backend needs a device KV cache (EngineCore::new_cache)");
    fs.push_back(FlashSegment{g.row0, g.rows, g.pos0,
                              CachedKv{g.kv->k.data, g.kv->v.data, g.kv->cap, g.kv->ring, g.cache_from, g.cache_to}});
  }
  const bool one_launch = flash_for(sh.head_dim) &&
                          (kernels_.attention_segments == SegmentsMode::kOne ||
                           (kernels_.attention_segments == SegmentsMode::kAuto &&
                            attention_flash_segments_fill(fs, sh, kernels_.attention_cols, kernels_.attention_pairs,
                                                          wgmma_)));
  if (!one_launch) {
    Backend::attention_segments(q, segs, k_fresh, v_fresh, causal, window, out);
    return;
  }
  const Tensor kf = as_f16(k_fresh), vf = as_f16(v_fresh);
  check(attention_flash_segments_cuda(q.data, fs, kf.data, vf.data, sh, causal, window, out.data, stream_,
                                      kernels_.attention_cols, kernels_.attention_pairs, wgmma_));
}

void CudaBackend::attention_topk(const Tensor& q, int64_t q_pos0, const KvLayer& kv, int64_t cache_from,
                                 int64_t cache_to, const Tensor& k_fresh, const Tensor& v_fresh, int64_t fresh_pos0,
                                 bool causal, int64_t window, const AttnTopk& topk, Tensor& out) {
  if (!topk.on()) {
    attention(q, q_pos0, kv, cache_from, cache_to, k_fresh, v_fresh, fresh_pos0, causal, window, out);
    return;
  }
  DG_CHECK(kv.k.device == Device::kCuda, "the CUDA backend needs a device KV cache (EngineCore::new_cache)");
  const CachedKv cached{kv.k.data, kv.v.data, kv.cap, kv.ring, cache_from, cache_to};
  attention_topk_cublas(blas_ctx(), q, q_pos0, cached, k_fresh, v_fresh, fresh_pos0, causal, window, topk, out);
}

void CudaBackend::kv_write(const KvLayer& kv, int64_t pos0, const Tensor& k, const Tensor& v) {
  const int64_t n = k.shape[0];
  check(kv_write_cuda(k.data, v.data, n, k.numel() / n, pos0, kv.k.data, kv.v.data, kv.cap, kv.ring, stream_));
}

void CudaBackend::moe(const Tensor& h, const Tensor& z, const MoeWeights& w, int top_k, Tensor& out) {
  join_route();  // a routing issued ahead that this call does not take
  const MoePathCtx c{blas_ctx(), kernels_, eps_, graph_.capturing(), q4_layout(),
                     [this](const char* n) { stage(n); }, route_ticket_};
  moe_cuda_path(c, h, z, w, top_k, out);
}

NextNormOut CudaBackend::next_norm_out(InputNorm* next, const Tensor& out) const {
  if (next == nullptr || !kernels_.next_norm_fused || next->w == nullptr || next->w->dtype != DType::kBF16 ||
      next->out.numel() != out.numel())
    return {};
  NextNormOut nn{next->w->data, next->out.data, {}};
  if (codes_wanted(&next->codes, next->out)) nn.codes = RowCodesOut{next->codes.codes.data, next->codes.scale.f32()};
  return next_norm_fits(tensor_cols(out), nn) ? nn : NextNormOut{};
}

void CudaBackend::next_norm_done(InputNorm* next, const NextNormOut& nn) {
  if (next == nullptr) return;
  next->filled = nn.y != nullptr;
  next->codes.filled = nn.codes.codes != nullptr;
  if (next->filled) ++input_norms_filled_;
  if (next->codes.filled) ++row_codes_filled_;
}

void CudaBackend::moe_ffn_tail(const Tensor& h, const Tensor& z, const MoeWeights& w, int top_k, Tensor& m1,
                               const Tensor& w1, const Tensor& w2, const Tensor& wn, RowScalar s, Tensor& out,
                               const MoeInputs* moe_in, InputNorm* next) {
  if (!kernels_.fused_norms) {
    join_route();  // the MoE below routes its rows itself
    Backend::moe_ffn_tail(h, z, w, top_k, m1, w1, w2, wn, s, out, moe_in, next);
    return;
  }
  const MoePathCtx c{blas_ctx(), kernels_, eps_, graph_.capturing(), q4_layout(), [this](const char* n) { stage(n); },
                     route_ticket_, moe_in, routed(moe_in)};
  const MoeTail tail{m1, w1, w2, wn, s, {}, next_norm_out(next, out)};
  moe_cuda_path(c, h, z, w, top_k, out, &tail);
  route_pending_ = false;  // the path waited for it before its experts
  next_norm_done(next, tail.next);
}

// The o projection's W8A8 product as raw sums, the post-attention chain applying their scales as it reads them
// (CudaKernels::a8_scales_on_load); otherwise the product, then the chain.
void CudaBackend::linear_residual_norms(const Tensor& x, const Tensor& w_o, const Tensor& h, const Tensor& w_post,
                                        Tensor& h1, std::span<const Tensor* const> w, std::span<Tensor* const> out,
                                        RowCodes* out0_codes, MoeInputs* moe_in) {
  const CublasCtx c = blas_ctx();
  if (out0_codes != nullptr) out0_codes->filled = false;
  if (moe_in != nullptr) moe_in->filled = false;
  const Tensor* wo[1] = {&w_o};
  const int64_t rows = tensor_rows(x), K = tensor_cols(x), N = w_o.shape[0];
  bool raw = kernels_.fused_norms && w.size() == out.size() && w.size() <= 3 && a8_on_load(c, x, wo) &&
             N == tensor_cols(h) && residual_vec_fits(N, {h.data, w_post.data, h1.data, fp8_scales(w_o)});
  for (size_t i = 0; raw && i < w.size(); ++i)
    raw = residual_vec_fits(N, {w[i] != nullptr ? w[i]->data : nullptr, out[i]->data});
  if (!raw) {
    Backend::linear_residual_norms(x, w_o, h, w_post, h1, w, out, out0_codes, moe_in);
    return;
  }
  const Act8 xq = a8_quantise(c, x);
  Tensor attn = alloc(Shape{rows, N});
  c.fp8->run_bf16(xq.codes.data, rows, K, w_o.data, N, attn.data, N, stream_);
  // out[0]'s codes from the same launch where its consumer reads them (row_codes gave buffers).
  RowCodesOut codes0;
  if (!out.empty() && codes_wanted(out0_codes, *out[0]) &&
      residual_codes_fit(N, {out[0]->data}, out0_codes->codes.data))
    codes0 = RowCodesOut{out0_codes->codes.data, out0_codes->scale.f32()};
  // The MoE's inputs of h1 and z (out[1]) from the same launch where the backend gave buffers (moe_inputs).
  MoeInputsOut mo;
  if (moe_in != nullptr && !moe_in->r.empty() && out.size() >= 2 && moe_in->router_scale != nullptr &&
      moe_in->r.numel() == h1.numel() && residual_codes_fit(N, {moe_in->r.data, moe_in->router_scale->data,
                                                               out[1]->data}, moe_in->z.codes.data))
    mo = MoeInputsOut{moe_in->router_scale->data, router_root(N), moe_in->r.data,
                      RowCodesOut{moe_in->z.codes.data, moe_in->z.scale.f32()}};
  launch_residual_norms(h, attn, w_post, h1, w, out, RawRowScales{xq.scale.f32(), fp8_scales(w_o)}, codes0, mo);
  if (codes0.codes != nullptr) {
    out0_codes->filled = true;
    ++row_codes_filled_;
  }
  if (mo.r != nullptr) moe_in->filled = true;
}

// The dense down projection's W8A8 product as raw sums, the MoE's feed-forward tail applying their scales as it
// reads them; otherwise the product, then the MoE and its tail.
void CudaBackend::linear_moe_ffn_tail(const Tensor& x, const Tensor& w_down, const Tensor& h, const Tensor& z,
                                      const MoeWeights& w, int top_k, const Tensor& w1, const Tensor& w2,
                                      const Tensor& wn, RowScalar s, Tensor& out, const RowCodes* x_codes,
                                      const MoeInputs* moe_in, InputNorm* next) {
  const CublasCtx c = blas_ctx();
  const Tensor* wd[1] = {&w_down};
  const int64_t rows = tensor_rows(x), K = tensor_cols(x), N = w_down.shape[0];
  const bool raw = kernels_.fused_norms && a8_on_load(c, x, wd) && N == tensor_cols(h) &&
                   residual_vec_fits(N, {h.data, w1.data, w2.data, wn.data, out.data, fp8_scales(w_down)});
  if (!raw) {
    Backend::linear_moe_ffn_tail(x, w_down, h, z, w, top_k, w1, w2, wn, s, out, x_codes, moe_in, next);
    return;
  }
  const Act8 xq = a8_input(c, x, x_codes);
  Tensor m1 = alloc(Shape{rows, N});
  c.fp8->run_bf16(xq.codes.data, rows, K, w_down.data, N, m1.data, N, stream_);
  stage("moe");
  const MoePathCtx mc{c, kernels_, eps_, graph_.capturing(), q4_layout(), [this](const char* n) { stage(n); },
                      route_ticket_, moe_in, routed(moe_in)};
  const MoeTail tail{m1, w1, w2, wn, s, RawRowScales{xq.scale.f32(), fp8_scales(w_down)}, next_norm_out(next, out)};
  moe_cuda_path(mc, h, z, w, top_k, out, &tail);
  route_pending_ = false;  // the path waited for it before its experts
  next_norm_done(next, tail.next);
}

void CudaBackend::lm_head(const Tensor& y, const Tensor& embed, float softcap, Tensor& logits) {
  lm_head_cuda(blas_ctx(), y, embed, softcap, logits);
}

OpenLogits CudaBackend::lm_head_open(const Tensor& y, const Tensor& embed, float softcap, Tensor& logits,
                                     Tensor* row_scale) {
  if (!kernels_.softcap_in_stats) return Backend::lm_head_open(y, embed, softcap, logits);
  return lm_head_open_cuda(blas_ctx(), y, embed, softcap, logits, row_scale);
}

void CudaBackend::finish_logits(Tensor& logits, const OpenLogits& open, int64_t row0) {
  if (!open.open) return;
  finish_logits_cuda(blas_ctx(), logits, open, row0);
}

Tensor CudaBackend::fp8_table(const Tensor& table, bool transpose) {
  return fp8_table_cuda(blas_ctx(), table, transpose);
}

void CudaBackend::soft_embed(const Tensor& sc_logits, const Tensor& embed, float sparse_cutoff, Tensor& out,
                             const Tensor* rows) {
  const SoftEmbedJob job{&sc_logits, sparse_cutoff, &out};
  soft_embeds(std::span<const SoftEmbedJob>(&job, 1), embed, rows);
}

void CudaBackend::soft_embeds(std::span<const SoftEmbedJob> jobs, const Tensor& embed, const Tensor* rows) {
  const SurvivorPath sp{kernels_.sc_survivors, rows, graph_.capturing(), branch_stream_, branch_blas_};
  soft_embeds_cuda(blas_ctx(), jobs, embed, sp);
}

Tensor CudaBackend::as_f16(const Tensor& t) {
  if (t.dtype == DType::kF16) return t;
  Tensor out = device(DType::kF16, t.shape);
  if (t.numel() > 0) check(convert_cuda(t.data, DType::kBF16, out.data, DType::kF16, t.numel(), stream_));
  return out;
}

const float* CudaBackend::device_inv_freq(const std::vector<float>& f) {
  auto it = inv_freq_.find(f.data());
  if (it == inv_freq_.end()) {
    DG_CHECK(!graph_.capturing(),
             "rotary frequencies must be on the device before a graph capture (run one step first)");
    Tensor t = device(DType::kF32, Shape{static_cast<int64_t>(f.size())});
    check(cudaMemcpyAsync(t.data, f.data(), f.size() * 4, cudaMemcpyHostToDevice, stream_), "inv_freq upload");
    it = inv_freq_.emplace(f.data(), std::move(t)).first;
  }
  return it->second.f32();
}

}  // namespace dg
