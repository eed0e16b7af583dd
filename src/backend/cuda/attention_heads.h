// The CUDA backend's products over side-by-side weights or fp8 weights with fp8 inputs, and its qkv_heads
// (Backend::qkv_heads): one cuBLAS product over the q/k/v weights that upload placed side by side, read in place by
// one heads_norm launch (every head's norm and each sequence's RoPE), where the shapes allow; the caller composes the
// ops otherwise.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cublas_paths.h"
#include "core/tensor.h"
#include "ops/rope/rope.h"

namespace dg {

// Past a few canvases the separate products are efficient already and the split's extra pass costs more (a
// 32-canvas batch: projections 57.5 ms fused against 51.3 ms separate, H200).
inline constexpr int64_t kFusedRowsMax = 1024;

// The first of w's non-null weights when they are bf16 [n_i, cols(x)] side by side in memory (n_i multiples of 8),
// two to four of them, and x has at most kFusedRowsMax rows: one product over them all, `total` columns wide.
// Null otherwise.
const Tensor* side_by_side(const Tensor& x, std::span<const Tensor* const> w, int64_t& total);

// The first of w's non-null weights when they are fp8 [n_i, cols(x)] placed side by side by
// CudaBackend::place_side_by_side (each fp8_group_stride past the one before), two to four of them: one e4m3 product
// over the first's codes, `total` columns wide, holds weight i's columns from col[i] (the columns between are not
// read). Null otherwise.
const Tensor* fp8_side_by_side(const Tensor& x, std::span<const Tensor* const> w, int64_t& total, int64_t* col);
// Whether the W8A8 products of w (every non-null one fp8, fp8 inputs on: c.act8) on x write raw sums whose scales
// the reading kernel applies (c.a8_on_load, not the streaming kernel's A/B, widths the bf16-output product takes).
bool a8_on_load(const CublasCtx& c, const Tensor& x, std::span<const Tensor* const> w);
// x [rows, K] quantised per row to E4M3: codes and their per-row f32 scales (moe_act_quant_fp8_cuda).
struct Act8 {
  Tensor codes, scale;
};
Act8 a8_quantise(const CublasCtx& c, const Tensor& x);
// Whether `codes` holds buffers for a producer to fill for x (an error naming the shapes when they are not x's).
bool codes_wanted(const RowCodes* codes, const Tensor& x);
// x's codes from its producer (RowCodes filled, of x's shape) or, without them, a8_quantise.
Act8 a8_input(const CublasCtx& c, const Tensor& x, const RowCodes* codes);

// Backend::linears: weights side by side (above) as one product and a split, or fp8 weights with fp8 inputs
// (c.act8) as W8A8 products sharing one quantisation of x; false (nothing done) for anything else.
bool linears_cuda(const CublasCtx& c, const Tensor& x, std::span<const Tensor* const> w,
                  std::span<Tensor* const> out);
// Backend::gated_linear: gate and up side by side as one bf16 product and the split gated GELU, or both fp8 with fp8
// inputs (c.act8) as W8A8 products (with c.a8_on_load: their raw sums as bf16, side by side, the scales applied by
// the gated GELU as it reads them); false (nothing done) for anything else.
// x_codes: x's RowCodes (used when filled); out_codes: out's, filled by the gated GELU's launch on the raw sums' path.
bool gated_linear_cuda(const CublasCtx& c, const Tensor& x, const Tensor& gate, const Tensor& up, Tensor& out,
                       const RowCodes* x_codes = nullptr, RowCodes* out_codes = nullptr);

// Backend::qkv_heads with the products as above (or each its own, through `linears`) and one heads_norm launch;
// fp8 weights with fp8 inputs and c.a8_on_load: the W8A8 products' raw sums as bf16, the input row's and the weight
// row's scales applied by heads_norm as it reads them (no row-scaled pass). False (nothing done) where the head dim
// or the spans do not suit it. inv_freq: the device copy. rope_table: the
// rows' rotations computed once into a table the heads share (rope_table_cuda; the same bits) instead of per head.
// f16 (not null): kn and vn also as f16 from the same launch, allocated here (FreshKvCopy: what the flash kernels
// read). a_codes: a's RowCodes, used by the W8A8 paths when filled.
bool qkv_heads_cuda(const CublasCtx& c, float eps, const float* inv_freq, const Tensor& a,
                    std::span<const Tensor* const> w, const Tensor* q_norm, const Tensor& k_norm,
                    std::span<const RopeSpan> spans, Tensor* qn, Tensor& kn, Tensor& vn,
                    const std::function<void(std::span<Tensor* const>)>& linears, bool rope_table = false,
                    FreshKvCopy* f16 = nullptr, const RowCodes* a_codes = nullptr);

}  // namespace dg
