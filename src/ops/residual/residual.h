// The residual-stream chains around a decoder layer's feed-forward, as single ops (no reference of their own: each
// is the composition of rmsnorm, add and scale that src/model/forward.cpp would otherwise issue one by one, and the
// Backend's default implementations are exactly that composition, which the CPU reference runs):
//   residual_norms: a = rmsnorm(attn) * w_post; h1 = h + a; out_i = rmsnorm(h1) * w_i (w_i null: no scale)
//   ffn_tail:       f = rmsnorm(m1) * w1 + rmsnorm(m2) * w2; out = (h1 + rmsnorm(f) * w) * scalar (RowScalar: one
//                   for the rows before its split, another for the rows after)
// Every intermediate is rounded to the activation storage where the composition stores it.
// Reference: DiffusionGemmaDecoderLayer.forward (post_attention_layernorm, the residual, pre_feedforward_layernorm,
// pre_feedforward_layernorm_2, post_feedforward_layernorm{,_1,_2}, layer_scalar).
#pragma once

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "core/status.h"
#include "ops/residual/row_scalar.h"

namespace dg {

// A W8A8 product's raw sums read by a chain (CudaKernels::a8_scales_on_load): element (r, d) times row[r] (the input
// row's scale) and col[d] (the weight row's scale of column d; 16-byte aligned), in f32, as the kernel loads it.
// col null: the values as stored. Only the vectorised rows take them; the other kernels refuse them.
struct RawRowScales {
  const float* row = nullptr;
  const float* col = nullptr;
};

// A normed output's E4M3 codes [rows, dim] and per-row f32 scales: the bytes moe_act_quant_fp8_cuda writes from the
// stored bf16 rows (a W8A8 product's input). codes null: none.
struct RowCodesOut {
  void* codes = nullptr;
  float* scale = nullptr;
};

// The W8A8 MoE's two inputs from the chain that makes h1 and z (z = out[1]): z's codes (RowCodesOut, the bytes
// moe_act_quant_fp8_cuda writes from z's stored rows) and the router's input r = bf16(bf16(bf16(h1 inv) scale) root)
// (router_prep of h1's unweighted norm, moe_router_input_cuda's arithmetic with h1's inverse RMS as this chain sums
// it, so r may differ from that kernel's by a bf16 step where the two sums round apart). r null: none.
struct MoeInputsOut {
  const void* router_scale = nullptr;
  float root = 0.0f;
  void* r = nullptr;
  RowCodesOut z;
};

// The next decoder layer's input norm of ffn_tail's output, from the same launch: y = rmsnorm(out) * w (bf16 [rows,
// dim], w bf16 [dim]) and its E4M3 codes (RowCodesOut, or none): the bytes rmsnorm_codes_cuda (rmsnorm_cuda without
// codes) writes from the stored out, its sum of squares in that kernel's order for rows of this width. y null: none.
struct NextNormOut {
  const void* w = nullptr;
  void* y = nullptr;
  RowCodesOut codes;
};

// bf16 rows [rows, dim] (weights bf16 [dim]), one block per row. Rows of a multiple of 8 elements up to 4,096
// (16-byte aligned) move as 16-byte vectors held in registers, their sums of squares in another f32 order than
// rmsnorm_cuda's; other rows keep rmsnorm_cuda's order, so they equal the unfused kernels bit for bit. n_out <= 3
// normed copies of h1. attn_raw: attn holds raw sums and their scales (above); m1_raw likewise for ffn_tail's m1.
// codes0: out[0]'s codes as well (RowCodesOut; needs residual_codes_fit, an error otherwise). moe: the MoE's inputs
// as well (MoeInputsOut, with out[1] as z; the same needs, an error otherwise).
Status residual_norms_cuda(const void* h, const void* attn, const void* w_post, void* h1, const void* const* w_out,
                           void* const* out, int n_out, int64_t rows, int64_t dim, float eps, cudaStream_t s,
                           RawRowScales attn_raw = {}, RowCodesOut codes0 = {}, MoeInputsOut moe = {});
// next: the next layer's input norm of out as well (NextNormOut; needs the vectorised rows and next_norm_fits, an
// error otherwise).
Status ffn_tail_cuda(const void* h1, const void* m1, const void* w1, const void* m2, const void* w2, const void* w,
                     RowScalar scalar, void* out, int64_t rows, int64_t dim, float eps, cudaStream_t s,
                     RawRowScales m1_raw = {}, NextNormOut next = {});
// ffn_tail with m2 combined from the MoE's expert rows inside the kernel, as moe_combine_cuda would store it (y: the
// expert products' rows, inv and weight [rows, top_k]; src/ops/moe/moe_cuda.h): the same bits as the two calls, one
// launch and no m2. Needs the vectorised rows (ffn_tail_moe_fits); otherwise an error.
Status ffn_tail_moe_cuda(const void* h1, const void* m1, const void* w1, const void* y, const int32_t* inv,
                         const float* weight, int top_k, const void* w2, const void* w, RowScalar scalar, void* out,
                         int64_t rows, int64_t dim, float eps, cudaStream_t s, RawRowScales m1_raw = {},
                         NextNormOut next = {});
// Whether rows of dim elements and these buffers (null ones aside) take the vectorised kernels: dim a multiple of 8
// up to 4,096, every pointer 16-byte aligned.
bool residual_vec_fits(int64_t dim, std::initializer_list<const void*> ptrs);
// residual_vec_fits, and codes (out[0]'s RowCodesOut, or null) 8-byte aligned: what residual_norms_cuda needs to write
// them (an error otherwise).
bool residual_codes_fit(int64_t dim, std::initializer_list<const void*> ptrs, const void* codes);
// Whether the tail's kernel can write `next` for rows of dim elements: its weight and y 16-byte aligned, codes (if
// any) 8-byte aligned with a scale buffer.
bool next_norm_fits(int64_t dim, const NextNormOut& next);
bool ffn_tail_moe_fits(int64_t dim, const void* h1, const void* m1, const void* w1, const void* y, const void* w2,
                       const void* w, const void* out);

}  // namespace dg
#endif
