// The CUDA backend's products over the vocabulary (see vocab_products.h).
#include "backend/cuda/vocab_products.h"

#include "backend/cuda/fp8_gemm.h"
#include "backend/cuda/graph_branch.h"
#include "backend/cuda/host_check.h"
#include "core/error.h"
#include "core/packed_layout.h"
#include "ops/elementwise/elementwise.h"
#include "ops/embed/embed.h"
#include "ops/linear/linear_cuda.h"
#include "ops/logits/logits_cuda.h"
#include "ops/moe/moe_cuda.h"
#include "ops/self_cond/self_cond_cuda.h"

namespace dg {

using cuda_host::check;

namespace {

void check_fp8_widths(int64_t hidden, int64_t vocab) {
  DG_CHECK(fp8_gemm_shape_ok(hidden, vocab), "--vocab-act fp8: the CUDA e4m3 product needs the hidden size and the "
           "vocabulary as multiples of 16 (this model: {} and {}); use --vocab-act bf16", hidden, vocab);
}

}  // namespace

OpenLogits lm_head_open_cuda(const CublasCtx& c, const Tensor& y, const Tensor& table, float softcap,
                             Tensor& logits, Tensor* row_scale) {
  const int64_t K = y.shape[y.shape.rank - 1], rows = y.numel() / K, V = table.shape[0];
  DG_CHECK(table.shape.rank == 2 && table.shape[1] == K && logits.numel() == rows * V,
           "lm_head: a table {} for rows of width {} into logits {}", table.shape.str(), K, logits.shape.str());
  if (table.dtype != DType::kFp8) {
    gemm_xwt_cublas(c.blas, y.data, rows, K, table.data, V, logits.data, CUDA_R_32F);
    return OpenLogits{true, {}, nullptr, softcap};
  }
  DG_CHECK(c.fp8 != nullptr, "lm_head: the backend has no W8A8 product");
  Tensor yq = c.alloc(DType::kU8, Shape{rows, K});
  DG_CHECK(row_scale == nullptr || (row_scale->dtype == DType::kF32 && row_scale->numel() == rows),
           "lm_head: a row-scale buffer of {} for {} rows", row_scale == nullptr ? 0 : row_scale->numel(), rows);
  Tensor ys = row_scale != nullptr ? *row_scale : c.alloc(DType::kF32, Shape{rows});
  check(moe_act_quant_fp8_cuda(y.data, rows, K, yq.data, ys.f32(), c.stream));
  c.fp8->run(yq.data, rows, K, table.data, V, logits.f32(), c.stream);
  return OpenLogits{true, ys, fp8_scales(table), softcap};
}

void lm_head_cuda(const CublasCtx& c, const Tensor& y, const Tensor& table, float softcap, Tensor& logits) {
  const OpenLogits open = lm_head_open_cuda(c, y, table, softcap, logits);
  finish_logits_cuda(c, logits, open, 0);
}

void finish_logits_cuda(const CublasCtx& c, Tensor& logits, const OpenLogits& open, int64_t row0) {
  if (!open.open) return;
  const int64_t V = logits.shape[logits.shape.rank - 1], rows = logits.numel() / V;
  if (open.row_scale.empty()) {
    check(softcap_cuda(logits.f32(), logits.numel(), open.cap, c.stream));
    return;
  }
  DG_CHECK(row0 >= 0 && row0 + rows <= open.row_scale.numel(), "finish_logits: rows [{}, {}) of a result of {}", row0,
           row0 + rows, open.row_scale.numel());
  check(softcap_scaled_cuda(logits.f32(), rows, V, open.row_scale.f32() + row0, open.col_scale, open.cap, c.stream));
}

namespace {

// The product path's buffers, allocated before a graph branch that runs it (a branch may not allocate).
struct DenseSoft {
  Tensor probs;   // [rows, vocab] bf16 probabilities (bf16 table)
  Tensor codes;   // [rows, vocab] e4m3 probabilities and their row scales (fp8 table)
  Tensor scales;
  Tensor acc;     // [rows, hidden] f32 sums (fp8 table)
};

DenseSoft dense_buffers(const CublasCtx& c, int64_t T, int64_t V, int64_t H, bool fp8) {
  if (!fp8) return DenseSoft{c.alloc(DType::kBF16, Shape{T, V}), {}, {}, {}};
  return DenseSoft{{}, c.alloc(DType::kU8, Shape{T, V}), c.alloc(DType::kF32, Shape{T}),
                   c.alloc(DType::kF32, Shape{T, H})};
}

// The probabilities (from the statistics already in `part` when stats_done) and their product with the whole
// table into out [T, hidden] bf16, before the embedding scale.
void dense_soft(const CublasCtx& c, const Tensor& sc_logits, const Tensor& table, float sparse_cutoff,
                const Tensor& part, bool stats_done, DenseSoft& b, Tensor& out) {
  const int64_t V = sc_logits.shape[sc_logits.shape.rank - 1], T = sc_logits.numel() / V;
  if (table.dtype == DType::kFp8) {
    const int64_t H = table.shape[0];
    DG_CHECK(c.fp8 != nullptr, "soft_embed: the backend has no W8A8 product");
    check(soft_probs_fp8_cuda(sc_logits.data, T, V, sparse_cutoff, b.codes.data, b.scales.f32(), part.data, c.stream,
                              c.soft_loads, stats_done));
    c.fp8->run(b.codes.data, T, V, table.data, H, b.acc.f32(), c.stream);
    check(rowscaled_epilogue_cuda(b.acc.f32(), table.data, DType::kFp8, T, H, V, out.data, c.stream, b.scales.f32()));
    return;
  }
  const int64_t H = table.shape[1];
  check(soft_probs_cuda(sc_logits.data, T, V, sparse_cutoff, b.probs.data, part.data, c.stream, c.soft_loads,
                        stats_done));
  const float one = 1.0f, zero = 0.0f;
  check(cublasGemmEx(c.blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(H), static_cast<int>(T), static_cast<int>(V),
                     &one, table.data, CUDA_R_16BF, static_cast<int>(H), b.probs.data, CUDA_R_16BF,
                     static_cast<int>(V), &zero, out.data, CUDA_R_16BF, static_cast<int>(H), CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT),
        "soft_embed gemm");
}

// The survivor path of soft_embed_cuda, after the statistics pass filled `part`: the lists, then the gather, and the
// product where a row overflowed (decided on the host, or by the graph's branch inside a capture).
void soft_survivors(const CublasCtx& c, const Tensor& sc_logits, const Tensor& table, float sparse_cutoff,
                    const Tensor& part, const SurvivorPath& sp, Tensor& out) {
  const int64_t V = sc_logits.shape[sc_logits.shape.rank - 1], T = sc_logits.numel() / V, H = out.numel() / T;
  const Tensor& rows = *sp.rows;
  DG_CHECK(rows.dtype == DType::kBF16 && rows.shape.rank == 2 && rows.shape[0] == V && rows.shape[1] == H,
           "soft_embed: the survivor rows are a bf16 [{}, {}] table, not {} {}", V, H, dtype_name(rows.dtype),
           rows.shape.str());
  Tensor idx = c.alloc(DType::kI32, Shape{T, sp.cap}), p = c.alloc(DType::kF32, Shape{T, sp.cap});
  Tensor count = c.alloc(DType::kI32, Shape{T + 1});  // the rows' counts, then the overflow flag
  check(cudaMemsetAsync(count.data, 0, static_cast<size_t>(T + 1) * sizeof(int32_t), c.stream), "survivor counts");
  check(soft_survivors_cuda(sc_logits.data, T, V, sparse_cutoff, part.data, sp.cap, idx.as<int32_t>(), p.f32(),
                            count.as<int32_t>(), c.stream));
  const bool fp8 = table.dtype == DType::kFp8;
  if (sp.capturing) {
    DG_CHECK(sp.branch != nullptr && sp.branch_blas != nullptr,
             "soft_embed: a captured survivor path needs the backend's branch stream (made where sc_survivors > 0)");
    DenseSoft b = dense_buffers(c, T, V, H, fp8);
    const cudaGraphConditionalHandle overflow = capture_condition(c.stream);
    check(soft_gather_cuda(idx.as<int32_t>(), p.f32(), count.as<int32_t>(), T, sp.cap, rows.data, H, out.data,
                           c.stream, &overflow));
    CublasCtx bc = c;
    bc.stream = sp.branch;
    bc.blas = sp.branch_blas;
    bc.alloc = [](DType, Shape) -> Tensor { fail("soft_embed: an allocation inside a graph branch"); };
    capture_if(c.stream, overflow, sp.branch,
               [&] { dense_soft(bc, sc_logits, table, sparse_cutoff, part, true, b, out); });
    return;
  }
  int32_t over = 0;
  check(cudaMemcpyAsync(&over, count.as<int32_t>() + T, sizeof over, cudaMemcpyDeviceToHost, c.stream),
        "survivor overflow flag");
  check(cudaStreamSynchronize(c.stream), "survivor overflow flag");
  if (over != 0) {
    DenseSoft b = dense_buffers(c, T, V, H, fp8);
    dense_soft(c, sc_logits, table, sparse_cutoff, part, true, b, out);
    return;
  }
  check(soft_gather_cuda(idx.as<int32_t>(), p.f32(), count.as<int32_t>(), T, sp.cap, rows.data, H, out.data,
                         c.stream));
}

}  // namespace

void soft_embed_cuda(const CublasCtx& c, const Tensor& sc_logits, const Tensor& table, float sparse_cutoff,
                     Tensor& out, SurvivorPath sp) {
  const int64_t V = sc_logits.shape[sc_logits.shape.rank - 1], T = sc_logits.numel() / V;
  const bool fp8 = table.dtype == DType::kFp8;
  const int64_t H = fp8 ? table.shape[0] : table.shape[1];
  DG_CHECK(table.shape.rank == 2 && table.shape[fp8 ? 1 : 0] == V && out.numel() == T * H,
           "soft_embed: a {} table {} for logits {} into {}", dtype_name(table.dtype), table.shape.str(),
           sc_logits.shape.str(), out.shape.str());
  Tensor part = c.alloc(DType::kF32, Shape{2 * T * soft_probs_slices(T, V)});
  // The survivor path takes bf16 tempered logits (what alloc_tempered gives) and a hidden size of 8-column chunks.
  if (sparse_cutoff > 0.0f && sp.cap > 0 && sp.rows != nullptr && sc_logits.dtype == DType::kBF16 && H % 8 == 0) {
    check(soft_probs_stats_cuda(sc_logits.data, T, V, part.data, c.stream, c.soft_loads));
    soft_survivors(c, sc_logits, table, sparse_cutoff, part, sp, out);
  } else {
    DenseSoft b = dense_buffers(c, T, V, H, fp8);
    dense_soft(c, sc_logits, table, sparse_cutoff, part, false, b, out);
  }
  check(scale_cuda(out.data, embed_scale(H, Storage::kBF16), out.numel(), c.stream));
}

Tensor fp8_table_cuda(const CublasCtx& c, const Tensor& table, bool transpose) {
  DG_CHECK(table.dtype == DType::kBF16 && table.shape.rank == 2, "fp8 table: a bf16 [vocab, hidden] table, not {} {}",
           dtype_name(table.dtype), table.shape.str());
  const int64_t V = table.shape[0], H = table.shape[1];
  check_fp8_widths(H, V);
  Tensor src = table;
  if (transpose) {
    src = c.alloc(DType::kBF16, Shape{H, V});
    check(transpose_cuda(table.data, V, H, src.data, c.stream));
  }
  Tensor out = c.alloc(DType::kFp8, src.shape);
  check(moe_act_quant_fp8_cuda(src.data, src.shape[0], src.shape[1], out.data, fp8_scales(out), c.stream));
  return out;
}

}  // namespace dg
