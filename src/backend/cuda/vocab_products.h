// The two products over the vocabulary on the CUDA backend — the lm_head with its softcap and the self-conditioning
// soft embedding — over the bf16 tied table (cuBLAS), or over its fp8 copies (--vocab-act fp8, Backend::fp8_table):
// the input quantised per row to E4M3, cuBLASLt's e4m3 product into f32 sums, both scales applied to the sums in the
// pass that follows (the softcap; the bf16 rounding of the soft embedding).
#pragma once

#include "backend/backend.h"
#include "backend/cuda/cublas_paths.h"
#include "core/tensor.h"

namespace dg {

// logits [rows, vocab] f32 = softcap(bf16(y table^T)); table bf16 [vocab, hidden] or fp8 [vocab, hidden].
void lm_head_cuda(const CublasCtx& c, const Tensor& y, const Tensor& table, float softcap, Tensor& logits);
// The same product with the softcap (and an fp8 table's scales) left open for row_stats_open_cuda: logits holds
// f32(y table^T) (bf16 table) or the raw e4m3 sums (fp8 table; the input rows' scales in the result's row_scale,
// written to `row_scale` when given, else to a buffer of its own).
[[nodiscard]] OpenLogits lm_head_open_cuda(const CublasCtx& c, const Tensor& y, const Tensor& table, float softcap,
                                           Tensor& logits, Tensor* row_scale = nullptr);
// Finishes rows [row0, ...) of such a result in place, as lm_head_cuda's softcap pass does.
void finish_logits_cuda(const CublasCtx& c, Tensor& logits, const OpenLogits& open, int64_t row0);
// Each job's out [rows, hidden] bf16 = bf16(bf16(softmax(sc_logits) table) * embed scale); table bf16 [vocab,
// hidden], or fp8 [hidden, vocab] (the transpose's rows, so both operands of the e4m3 product run along the
// vocabulary).
// With a cutoff and a survivor path (cap > 0, rows: the bf16 table [vocab, hidden]) the survivors are listed first
// (soft_survivors_cuda) and, where every row has at most cap of them, their rows summed (soft_gather_cuda; twin:
// soft_embed_cpu over `rows`), else the product as above. Outside a capture every job's survivors are listed first and
// the host reads all their overflow flags in one copy (one synchronisation for the call); inside one the gather sets
// a condition of the graph and the product is captured into the branch it guards (graph_branch.h), on the path's
// own stream and cuBLAS handle.
struct SurvivorPath {
  int cap = 0;  // CudaKernels::sc_survivors
  const Tensor* rows = nullptr;
  bool capturing = false;
  cudaStream_t branch = nullptr;  // for the branch's capture (the backend's, made where cap > 0)
  cublasHandle_t branch_blas = nullptr;
};
void soft_embeds_cuda(const CublasCtx& c, std::span<const Backend::SoftEmbedJob> jobs, const Tensor& table,
                      const SurvivorPath& sp);
// The bf16 table [vocab, hidden] as fp8 rows (`transpose`: its transpose [hidden, vocab] as fp8 rows), quantised by
// the activations' per-row quantiser, whose codes and scales are encode_rows'. Throws dg::Error naming the sizes
// where the e4m3 product cannot take them (both multiples of 16).
Tensor fp8_table_cuda(const CublasCtx& c, const Tensor& table, bool transpose);

}  // namespace dg
