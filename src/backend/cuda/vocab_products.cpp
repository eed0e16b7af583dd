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

struct SoftShape {
  int64_t T, V, H;
};

// The probabilities (from the statistics already in `part` when stats_done) and their product with the whole
// table into out [T, hidden] bf16, before the embedding scale.
void dense_soft(const CublasCtx& c, const Tensor& sc_logits, const Tensor& table, const SoftShape& sh,
                float sparse_cutoff, const Tensor& part, bool stats_done, DenseSoft& b, Tensor& out) {
  const int64_t T = sh.T, V = sh.V, H = sh.H;
  if (table.dtype == DType::kFp8) {
    DG_CHECK(c.fp8 != nullptr, "soft_embed: the backend has no W8A8 product");
    check(soft_probs_fp8_cuda(sc_logits.data, T, V, sparse_cutoff, b.codes.data, b.scales.f32(), part.data, c.stream,
                              c.soft_loads, stats_done));
    c.fp8->run(b.codes.data, T, V, table.data, H, b.acc.f32(), c.stream);
    check(rowscaled_epilogue_cuda(b.acc.f32(), table.data, DType::kFp8, T, H, V, out.data, c.stream, b.scales.f32()));
    return;
  }
  check(soft_probs_cuda(sc_logits.data, T, V, sparse_cutoff, b.probs.data, part.data, c.stream, c.soft_loads,
                        stats_done));
  const float one = 1.0f, zero = 0.0f;
  check(cublasGemmEx(c.blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(H), static_cast<int>(T), static_cast<int>(V),
                     &one, table.data, CUDA_R_16BF, static_cast<int>(H), b.probs.data, CUDA_R_16BF,
                     static_cast<int>(V), &zero, out.data, CUDA_R_16BF, static_cast<int>(H), CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT),
        "soft_embed gemm");
}

SoftShape soft_shape(const Backend::SoftEmbedJob& j, const Tensor& table) {
  const Tensor& x = *j.sc_logits;
  const int64_t V = x.shape[x.shape.rank - 1], T = x.numel() / V;
  const bool fp8 = table.dtype == DType::kFp8;
  const int64_t H = fp8 ? table.shape[0] : table.shape[1];
  DG_CHECK(table.shape.rank == 2 && table.shape[fp8 ? 1 : 0] == V && j.out->numel() == T * H,
           "soft_embed: a {} table {} for logits {} into {}", dtype_name(table.dtype), table.shape.str(),
           x.shape.str(), j.out->shape.str());
  return SoftShape{T, V, H};
}

// Whether a job takes the survivor path: a cutoff, the path on, bf16 tempered logits (what alloc_tempered gives)
// and a hidden size of 8-column chunks.
bool takes_survivors(const Backend::SoftEmbedJob& j, const SurvivorPath& sp, const SoftShape& sh) {
  if (!(j.sparse_cutoff > 0.0f && sp.cap > 0 && sp.rows != nullptr && j.sc_logits->dtype == DType::kBF16 &&
        sh.H % 8 == 0))
    return false;
  const Tensor& rows = *sp.rows;
  DG_CHECK(rows.dtype == DType::kBF16 && rows.shape.rank == 2 && rows.shape[0] == sh.V && rows.shape[1] == sh.H,
           "soft_embed: the survivor rows are a bf16 [{}, {}] table, not {} {}", sh.V, sh.H, dtype_name(rows.dtype),
           rows.shape.str());
  return true;
}

void scale_soft(const CublasCtx& c, Tensor& out, int64_t H) {
  check(scale_cuda(out.data, embed_scale(H, Storage::kBF16), out.numel(), c.stream));
}

// The statistics pass's (max, sum of exp) pairs of each row's slices.
Tensor stats_scratch(const CublasCtx& c, const SoftShape& sh) {
  return c.alloc(DType::kF32, Shape{2 * sh.T * soft_probs_slices(sh.T, sh.V)});
}

void dense_job(const CublasCtx& c, const Backend::SoftEmbedJob& j, const Tensor& table, const SoftShape& sh) {
  const Tensor part = stats_scratch(c, sh);
  DenseSoft b = dense_buffers(c, sh.T, sh.V, sh.H, table.dtype == DType::kFp8);
  dense_soft(c, *j.sc_logits, table, sh, j.sparse_cutoff, part, false, b, *j.out);
  scale_soft(c, *j.out, sh.H);
}

// A survivor job's statistics pass and lists (count: [T + 1], zeroed).
struct Listed {
  Tensor part, idx, p;
  int32_t* count = nullptr;
};

Listed list_survivors(const CublasCtx& c, const Backend::SoftEmbedJob& j, const SoftShape& sh, int cap,
                      int32_t* count) {
  Listed l{stats_scratch(c, sh), c.alloc(DType::kI32, Shape{sh.T, cap}), c.alloc(DType::kF32, Shape{sh.T, cap}), count};
  check(soft_probs_stats_cuda(j.sc_logits->data, sh.T, sh.V, l.part.data, c.stream, c.soft_loads));
  check(soft_survivors_cuda(j.sc_logits->data, sh.T, sh.V, j.sparse_cutoff, l.part.data, cap, l.idx.as<int32_t>(),
                            l.p.f32(), count, c.stream));
  return l;
}

// Inside a capture: the gather sets a condition of the graph to the overflow flag, and the product is captured into
// the branch it guards, on the path's stream and cuBLAS handle, its buffers allocated before.
void captured_job(const CublasCtx& c, const Backend::SoftEmbedJob& j, const Tensor& table, const SoftShape& sh,
                  const SurvivorPath& sp) {
  DG_CHECK(sp.branch != nullptr && sp.branch_blas != nullptr,
           "soft_embed: a captured survivor path needs the backend's branch stream (made where sc_survivors > 0)");
  Tensor count = c.alloc(DType::kI32, Shape{sh.T + 1});
  check(cudaMemsetAsync(count.data, 0, static_cast<size_t>(sh.T + 1) * sizeof(int32_t), c.stream), "survivor counts");
  const Listed l = list_survivors(c, j, sh, sp.cap, count.as<int32_t>());
  DenseSoft b = dense_buffers(c, sh.T, sh.V, sh.H, table.dtype == DType::kFp8);
  const cudaGraphConditionalHandle overflow = capture_condition(c.stream);
  check(soft_gather_cuda(l.idx.as<int32_t>(), l.p.f32(), l.count, sh.T, sp.cap, sp.rows->data, sh.H, j.out->data,
                         c.stream, &overflow));
  CublasCtx bc = c;
  bc.stream = sp.branch;
  bc.blas = sp.branch_blas;
  bc.alloc = [](DType, Shape) -> Tensor { fail("soft_embed: an allocation inside a graph branch"); };
  capture_if(c.stream, overflow, sp.branch,
             [&] { dense_soft(bc, *j.sc_logits, table, sh, j.sparse_cutoff, l.part, true, b, *j.out); });
  scale_soft(c, *j.out, sh.H);
}

}  // namespace

void soft_embeds_cuda(const CublasCtx& c, std::span<const Backend::SoftEmbedJob> jobs, const Tensor& table,
                      const SurvivorPath& sp) {
  std::vector<SoftShape> shapes;
  shapes.reserve(jobs.size());
  std::vector<int64_t> count_at;  // per survivor job: its counts' offset in one buffer; -1: the product
  int64_t counts = 0;
  for (const Backend::SoftEmbedJob& j : jobs) {
    const SoftShape& sh = shapes.emplace_back(soft_shape(j, table));
    count_at.push_back(-1);
    if (!takes_survivors(j, sp, sh)) {
      dense_job(c, j, table, sh);
    } else if (sp.capturing) {
      captured_job(c, j, table, sh, sp);
    } else {  // listed below, with the other jobs'
      count_at.back() = counts;
      counts += sh.T + 1;
    }
  }
  if (counts == 0) return;
  // Outside a capture: every survivor job listed, then their overflow flags read in one copy (one synchronisation),
  // then each job's gather, or its product where a row overflowed.
  Tensor count = c.alloc(DType::kI32, Shape{counts});
  check(cudaMemsetAsync(count.data, 0, static_cast<size_t>(counts) * sizeof(int32_t), c.stream), "survivor counts");
  std::vector<Listed> listed(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i)
    if (count_at[i] >= 0) listed[i] = list_survivors(c, jobs[i], shapes[i], sp.cap, count.as<int32_t>() + count_at[i]);
  std::vector<int32_t> host(static_cast<size_t>(counts));
  check(cudaMemcpyAsync(host.data(), count.data, host.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, c.stream),
        "survivor overflow flags");
  check(cudaStreamSynchronize(c.stream), "survivor overflow flags");
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (count_at[i] < 0) continue;
    const SoftShape& sh = shapes[i];
    const Listed& l = listed[i];
    if (host[static_cast<size_t>(count_at[i] + sh.T)] != 0) {
      DenseSoft b = dense_buffers(c, sh.T, sh.V, sh.H, table.dtype == DType::kFp8);
      dense_soft(c, *jobs[i].sc_logits, table, sh, jobs[i].sparse_cutoff, l.part, true, b, *jobs[i].out);
    } else {
      check(soft_gather_cuda(l.idx.as<int32_t>(), l.p.f32(), l.count, sh.T, sp.cap, sp.rows->data, sh.H,
                             jobs[i].out->data, c.stream));
    }
    scale_soft(c, *jobs[i].out, sh.H);
  }
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
