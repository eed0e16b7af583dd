// The CUDA backend's MoE block (see moe_path.h).
#include "backend/cuda/moe_path.h"

#include <vector>

#include "backend/cuda/host_check.h"
#include "core/error.h"
#include "ops/glu/glu_cuda.h"
#include "ops/moe/q4_layout.h"
#include "ops/moe/row_tiles.h"
#include "ops/residual/residual.h"

namespace dg {

using cuda_host::check;

namespace {

// The down product's column tiles a streaming CTA (CudaKernels::moe_down_col_tiles; 0: 2 for W8A8 experts, 1 for
// the others).
int moe_down_col_tiles(const CudaKernels& k, bool act8) {
  return k.moe_down_col_tiles > 0 ? k.moe_down_col_tiles : act8 ? 2 : 1;
}

}  // namespace

void moe_route_buffers(const std::function<Tensor(DType, Shape)>& device, const CudaKernels& k, unsigned* ticket,
                       int64_t T, int64_t E, int top_k, MoeRouting& g) {
  const int64_t P = T * top_k;
  g.scores = device(DType::kBF16, Shape{T, E});
  g.idx = device(DType::kI32, Shape{P}), g.wts = device(DType::kF32, Shape{P});
  g.counts = device(DType::kI32, Shape{E}), g.offsets = device(DType::kI32, Shape{E + 1});
  g.perm = device(DType::kI32, Shape{P}), g.inv = device(DType::kI32, Shape{P});
  if (ticket != nullptr && k.moe_route_fused && moe_route_group_takes(T, E, top_k))
    g.scratch = device(DType::kI32, Shape{moe_route_group_scratch(T, E, top_k)});
}

void moe_route_rows(cublasHandle_t blas, cudaStream_t s, const CudaKernels& k, unsigned* ticket, const Tensor& r,
                    const MoeWeights& w, int top_k, MoeRouting& g) {
  const int64_t H = r.shape[r.shape.rank - 1], T = r.numel() / H, E = w.router_proj.shape[0], P = T * top_k;
  DG_CHECK(g.idx.numel() == P && g.scores.numel() == T * E, "MoE routing: buffers for another call");
  gemm_xwt_cublas(blas, r.data, T, H, w.router_proj.data, E, g.scores.data, CUDA_R_16BF);
  if (!g.scratch.empty()) {
    check(moe_route_group_cuda(g.scores.data, T, E, top_k, w.per_expert_scale.data, g.idx.as<int32_t>(),
                               g.wts.f32(), g.counts.as<int32_t>(), g.offsets.as<int32_t>(), g.perm.as<int32_t>(),
                               g.inv.as<int32_t>(), g.scratch.as<int32_t>(), ticket, s));
  } else {
    check(moe_route_cuda(g.scores.data, T, E, top_k, w.per_expert_scale.data, g.idx.as<int32_t>(), g.wts.f32(), s));
    check(moe_group_cuda(g.idx.as<int32_t>(), P, E, g.counts.as<int32_t>(), g.offsets.as<int32_t>(),
                         g.perm.as<int32_t>(), g.inv.as<int32_t>(), s, k.moe_group_blocks));
  }
}

void moe_cuda_path(const MoePathCtx& c, const Tensor& h, const Tensor& z, const MoeWeights& w, int top_k,
                   Tensor& out, const MoeTail* tail) {
  const cudaStream_t s = c.blas.stream;
  const auto& device = c.blas.alloc;
  const int64_t H = h.shape[h.shape.rank - 1], T = h.numel() / H, E = w.router_proj.shape[0];
  const int64_t two_ff = w.gate_up.shape[1], ff = two_ff / 2, P = T * top_k;
  Tensor r;
  const float root = router_root(H);
  // W8A8: z's per-row codes and scales come with the router's input (one launch), or from the residual chain.
  Tensor zq, zs;
  if (w.act == DType::kFp8 && c.inputs != nullptr && c.inputs->filled) {
    r = c.inputs->r;
    zq = c.inputs->z.codes;
    zs = c.inputs->z.scale;
  } else if (w.act == DType::kFp8) {
    r = device(DType::kBF16, Shape{T, H});
    zq = device(DType::kU8, Shape{T, H});
    zs = device(DType::kF32, Shape{T});
    check(moe_inputs_fp8_cuda(h.data, w.router_scale.data, r.data, T, H, c.eps, root, z.data, zq.data, zs.f32(), s));
  } else if (c.routed == nullptr) {  // routed ahead: the router's input was the routing's
    r = device(DType::kBF16, Shape{T, H});
    check(moe_router_input_cuda(h.data, w.router_scale.data, r.data, T, H, c.eps, root, s));
  }
  MoeRouting g;
  if (c.routed != nullptr) {  // routed on a stream of its own beside the dense MLP: join it
    DG_CHECK(c.inputs != nullptr && c.inputs->routing.issued, "MoE: a routing join without a routing");
    check(cudaStreamWaitEvent(s, c.routed, 0), "the routing's join");
    g = c.inputs->routing;
  } else {
    moe_route_buffers(device, c.kernels, c.route_ticket, T, E, top_k, g);
    moe_route_rows(c.blas.blas, s, c.kernels, c.route_ticket, r, w, top_k, g);
  }
  const Tensor &wts = g.wts, &offsets = g.offsets, &perm = g.perm, &inv = g.inv;
  Tensor y = g.experts ? g.y : device(DType::kBF16, Shape{P + 16, H});
  c.stage("moe_experts");
  // The streaming kernel reads 16-byte row chunks: hidden and ff must be multiples of 8 (every published shape
  // is); other shapes take the wmma kernel, also free of host synchronisation.
  const bool packed = dtype_is_packed(w.gate_up.dtype) || dtype_is_packed(w.down.dtype);
  // auto: calls of at least moe_auto_rows tokens take passes of 128 rows where the experts' format has them (bf16,
  // and W8A8), cuBLAS's grouped GEMM for other unpacked weights outside graph captures; smaller calls stream.
  const bool big = c.kernels.moe == MoeKernel::kAuto && T >= c.kernels.moe_auto_rows;
  const bool wide_format = H % 8 == 0 && ff % 8 == 0 &&
                           (w.act == DType::kFp8 ? w.gate_up.dtype == DType::kFp8 && w.down.dtype == DType::kFp8
                                                 : w.gate_up.dtype == DType::kBF16 && w.down.dtype == DType::kBF16);
  // auto from twice moe_auto_rows tokens (measured from 2,048: docs/CUDA.md): the warp-specialised kernel where it
  // runs and takes both products (Hopper).
  const bool act8 = w.act == DType::kFp8;
  const bool ws_auto = big && wide_format && T >= 2 * c.kernels.moe_auto_rows &&
                       moe_ws_takes(act8, H, E, two_ff, T) && moe_ws_takes(act8, ff, E, H, P);
  const bool ws = c.kernels.moe == MoeKernel::kWs || ws_auto;  // W8A8, bf16 and q4 products warp-specialised
  // q4 in the kernel layout: the warp-specialised kernel wherever it runs (Hopper), at every size (docs/CUDA.md,
  // "q4 in the warp-specialised kernel"); --moe stream keeps the streaming kernel.
  const bool q4_ws = w.act != DType::kFp8 && w.gate_up.dtype == DType::kQ4 && w.down.dtype == DType::kQ4 &&
                     c.q4 == WeightLayout::kKernel &&
                     (c.kernels.moe == MoeKernel::kWs ||
                      (c.kernels.moe == MoeKernel::kAuto && moe_ws_q4_takes(H, E, two_ff, T) &&
                       moe_ws_q4_takes(ff, E, H, P)));
  // How each expert stack lies, as the upload left it: q4 in the kernel layout (c.q4) or its stage tiles
  // (q4_tiled_experts; only the warp-specialised kernel reads them), fp8 and bf16 as stored or in stage tiles
  // (row_tiled_experts; both kernels read them).
  const auto layout_of = [&](const Tensor& t) {
    if (t.dtype == DType::kQ4) return q4_tiled_experts(c.kernels, t.shape) ? WeightLayout::kTiled : c.q4;
    return row_tiled_experts(c.kernels, t.dtype, t.shape) ? WeightLayout::kTiled : WeightLayout::kDisk;
  };
  const WeightLayout up_layout = layout_of(w.gate_up), down_layout = layout_of(w.down);
  const bool tiled = up_layout == WeightLayout::kTiled || down_layout == WeightLayout::kTiled;
  const auto q4_tiles = [](const Tensor& t, WeightLayout l) {
    return t.dtype == DType::kQ4 && l == WeightLayout::kTiled;
  };
  DG_CHECK(q4_ws || (!q4_tiles(w.gate_up, up_layout) && !q4_tiles(w.down, down_layout)),
           "MoE of {} rows: the q4 experts are in stage tiles, which only --moe ws's kernel reads, and it does not "
           "take this call; run with --no-q4-tiles", T);
  const bool wide = c.kernels.moe == MoeKernel::kWide || ws || (big && wide_format);
  const int up_tiles = c.kernels.moe_up_col_tiles;
  const int down_tiles = moe_down_col_tiles(c.kernels, w.act == DType::kFp8);
  const bool cublas = c.kernels.moe == MoeKernel::kCublas || (big && !wide && !c.capturing);
  const bool stream = (c.kernels.moe == MoeKernel::kStream || c.kernels.moe == MoeKernel::kAuto || wide) && !cublas;
  if (g.experts) {
    // issued with the routing on its stream (moe_experts_ahead) and joined with it above
  } else if (w.act == DType::kFp8 && ws) {  // W8A8 in the persistent warp-specialised kernel (moe_ws.cu)
    Tensor act = device(DType::kBF16, Shape{P, ff});
    check(moe_ws_gate_up_cuda(zq.data, zs.f32(), perm.as<int32_t>(), top_k, T, H, w.gate_up.data,
                              w.gate_up.dtype, ff, E, offsets.as<int32_t>(), act.data, s, MoeWsForm{2, up_layout}));
    Tensor aq = device(DType::kU8, Shape{P, ff}), as = device(DType::kF32, Shape{P});
    check(moe_act_quant_fp8_cuda(act.data, P, ff, aq.data, as.f32(), s));
    check(moe_ws_gemm_cuda(aq.data, as.f32(), nullptr, 1, P, ff, w.down.data, w.down.dtype, H, E,
                           offsets.as<int32_t>(), y.data, s, MoeWsForm{2, down_layout}));
  } else if (w.act == DType::kFp8) {  // W8A8: both inputs quantised per row, e4m3 products
    Tensor act = device(DType::kBF16, Shape{P, ff});
    Tensor aq = device(DType::kU8, Shape{P, ff}), as = device(DType::kF32, Shape{P});
    moe_a8_stream_products(c.kernels, s, zq, zs, g, w, top_k, wide, act, aq, as, y);
  } else if (ws && w.gate_up.dtype == DType::kBF16 && w.down.dtype == DType::kBF16 && H % 8 == 0 && ff % 8 == 0) {
    Tensor act = device(DType::kBF16, Shape{P, ff});  // bf16 in the warp-specialised kernel, gathering z's rows
    check(moe_ws_gate_up_cuda(z.data, nullptr, perm.as<int32_t>(), top_k, T, H, w.gate_up.data, DType::kBF16, ff,
                              E, offsets.as<int32_t>(), act.data, s, MoeWsForm{2, up_layout}));
    check(moe_ws_gemm_cuda(act.data, nullptr, nullptr, 1, P, ff, w.down.data, DType::kBF16, H, E,
                           offsets.as<int32_t>(), y.data, s, MoeWsForm{2, down_layout}));
  } else if (q4_ws) {
    Tensor act = device(DType::kBF16, Shape{P, ff});  // q4 in the warp-specialised kernel (moe_ws_q4.cu)
    check(moe_ws_gate_up_cuda(z.data, nullptr, perm.as<int32_t>(), top_k, T, H, w.gate_up.data, DType::kQ4, ff, E,
                              offsets.as<int32_t>(), act.data, s, MoeWsForm{c.kernels.moe_q4_consumers, up_layout}));
    check(moe_ws_gemm_cuda(act.data, nullptr, nullptr, 1, P, ff, w.down.data, DType::kQ4, H, E,
                           offsets.as<int32_t>(), y.data, s, MoeWsForm{c.kernels.moe_q4_consumers, down_layout}));
  } else if (packed || (stream && H % 8 == 0 && ff % 8 == 0)) {  // gathers z's rows itself
    Tensor act = device(DType::kBF16, Shape{P, ff});
    const bool wide_up = wide && w.gate_up.dtype == DType::kBF16, wide_down = wide && w.down.dtype == DType::kBF16;
    check(moe_stream_gate_up_cuda(z.data, perm.as<int32_t>(), top_k, H, w.gate_up.data,
                                  w.gate_up.dtype, ff, E, offsets.as<int32_t>(), act.data, s, nullptr,
                                  c.kernels.moe_q4_stages, up_layout, wide_up, wide_up ? 1 : up_tiles));
    check(moe_stream_gemm_cuda(act.data, nullptr, 1, ff, w.down.data, w.down.dtype, H, E,
                               offsets.as<int32_t>(), y.data, s, nullptr, c.kernels.moe_q4_stages,
                               down_layout, wide_down, wide_down ? 1 : down_tiles));
  } else {
    DG_CHECK(!tiled,
             "MoE of {} rows: the bf16 experts are in stage tiles, which the grouped products do not read; run with "
             "--no-bf16-tiles", T);
    Tensor xg = device(DType::kBF16, Shape{P + 16, H});
    check(moe_gather_cuda(z.data, perm.as<int32_t>(), P, top_k, H, xg.data, s));
    Tensor gu = device(DType::kBF16, Shape{P + 16, two_ff});
    Tensor act = device(DType::kBF16, Shape{P + 16, ff});
    if (cublas) {
      std::vector<int32_t> off(static_cast<size_t>(E + 1));
      check(cudaMemcpyAsync(off.data(), offsets.data, off.size() * 4, cudaMemcpyDeviceToHost, s), "offsets");
      check(cudaStreamSynchronize(s), "offsets sync");
      grouped_gemm_cublas(c.blas, xg.data, H, w.gate_up.data, two_ff, off, gu.data);
      check(gelu_mul_split_cuda(gu.data, P, ff, act.data, s));
      grouped_gemm_cublas(c.blas, act.data, ff, w.down.data, H, off, y.data);
    } else {
      check(moe_grouped_gemm_cuda(xg.data, H, w.gate_up.data, two_ff, E, offsets.as<int32_t>(), gu.data,
                                  s));
      check(gelu_mul_split_cuda(gu.data, P, ff, act.data, s));
      check(moe_grouped_gemm_cuda(act.data, ff, w.down.data, H, E, offsets.as<int32_t>(), y.data,
                                  s));
    }
  }
  c.stage("moe");
  if (tail == nullptr) {
    check(moe_combine_cuda(y.data, inv.as<int32_t>(), wts.f32(), T, top_k, H, out.data, s));
  } else if (ffn_tail_moe_fits(H, h.data, tail->m1.data, tail->w1.data, y.data, tail->w2.data, tail->w.data,
                               out.data)) {
    check(ffn_tail_moe_cuda(h.data, tail->m1.data, tail->w1.data, y.data, inv.as<int32_t>(), wts.f32(), top_k,
                            tail->w2.data, tail->w.data, tail->scalar, out.data, T, H, c.eps, s, tail->m1_raw,
                            tail->next));
  } else {
    Tensor m2 = device(DType::kBF16, Shape{T, H});
    check(moe_combine_cuda(y.data, inv.as<int32_t>(), wts.f32(), T, top_k, H, m2.data, s));
    check(ffn_tail_cuda(h.data, tail->m1.data, tail->w1.data, m2.data, tail->w2.data, tail->w.data, tail->scalar,
                        out.data, T, H, c.eps, s, tail->m1_raw, tail->next));
  }

}

bool moe_a8_streams(const CudaKernels& k, const MoeWeights& w, int64_t T) {
  return w.act == DType::kFp8 && w.gate_up.dtype == DType::kFp8 && w.down.dtype == DType::kFp8 &&
         ((k.moe == MoeKernel::kAuto && T < k.moe_auto_rows) || k.moe == MoeKernel::kStream);
}

void moe_a8_stream_products(const CudaKernels& k, cudaStream_t s, const Tensor& zq, const Tensor& zs,
                            const MoeRouting& g, const MoeWeights& w, int top_k, bool wide, Tensor& act, Tensor& aq,
                            Tensor& as, Tensor& y) {
  const int64_t H = zq.shape[zq.shape.rank - 1], E = w.gate_up.shape[0], ff = w.gate_up.shape[1] / 2;
  const int64_t P = g.perm.numel();
  const auto layout = [&](const Tensor& t) {
    return row_tiled_experts(k, t.dtype, t.shape) ? WeightLayout::kTiled : WeightLayout::kDisk;
  };
  const int up_tiles = wide ? 1 : k.moe_up_col_tiles;
  const int down_tiles = wide ? 1 : moe_down_col_tiles(k, true);
  check(moe_stream_gate_up_cuda(zq.data, g.perm.as<int32_t>(), top_k, H, w.gate_up.data, w.gate_up.dtype, ff, E,
                                g.offsets.as<int32_t>(), act.data, s, zs.f32(), k.moe_a8_stages, layout(w.gate_up),
                                wide, up_tiles));
  check(moe_act_quant_fp8_cuda(act.data, P, ff, aq.data, as.f32(), s));
  check(moe_stream_gemm_cuda(aq.data, nullptr, 1, ff, w.down.data, w.down.dtype, H, E, g.offsets.as<int32_t>(),
                             y.data, s, as.f32(), k.moe_a8_stages, layout(w.down), wide, down_tiles));
}

bool row_tiled_experts(const CudaKernels& kernels, DType dtype, const Shape& s) {
  const bool streamed = kernels.moe == MoeKernel::kAuto || kernels.moe == MoeKernel::kStream ||
                        kernels.moe == MoeKernel::kWide || kernels.moe == MoeKernel::kWs;
  const bool on = dtype == DType::kFp8 ? kernels.fp8_tiles : dtype == DType::kBF16 && kernels.bf16_tiles && streamed;
  return on && s.rank == 3 && row_tiles_ok(dtype, s);
}

bool q4_tiled_experts(const CudaKernels& kernels, const Shape& s) {
  return kernels.q4_kernel_layout && kernels.q4_tiles &&
         (kernels.moe == MoeKernel::kAuto || kernels.moe == MoeKernel::kWs) && s.rank == 3 && q4_tiled_ok(s) &&
         moe_ws_q4_takes(s[2], s[0], s[1], 1);
}

}  // namespace dg
