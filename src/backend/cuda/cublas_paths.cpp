// The cuBLAS-driven alternatives of the CUDA backend (see cublas_paths.h).
#include "backend/cuda/cublas_paths.h"

#include <algorithm>

#include "backend/cuda/host_check.h"
#include "core/error.h"

namespace dg {
namespace {

using cuda_host::check;

// scores [nH, rows, S] (f32) = Q K^T for query rows [c0, c0 + rows) of q (bf16 [T, nH, D]) over gathered keys k (bf16
// [S, nKV, D]): per KV head one strided batch over its query heads.
void attention_scores(const CublasCtx& ctx, const uint16_t* q, const uint16_t* k, int64_t c0, int64_t rows, int64_t nH,
                      int64_t nKV, int64_t D, int64_t S, float* scores) {
  const float one = 1.0f, zero = 0.0f;
  const int64_t g = nH / nKV;
  for (int64_t h = 0; h < nKV; ++h)
    check(cublasGemmStridedBatchedEx(ctx.blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(S), static_cast<int>(rows),
                                     static_cast<int>(D), &one, k + h * D, CUDA_R_16BF, static_cast<int>(nKV * D), 0,
                                     q + (c0 * nH + h * g) * D, CUDA_R_16BF, static_cast<int>(nH * D), D, &zero,
                                     scores + h * g * rows * S, CUDA_R_32F, static_cast<int>(S), rows * S,
                                     static_cast<int>(g), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "attention scores");
}

// Query rows per chunk so that the f32 scores of a chunk stay under `bytes`.
int64_t rows_per_chunk(int64_t T, int64_t nH, int64_t S, int64_t bytes) {
  return std::max<int64_t>(1, std::min<int64_t>(T, bytes / (nH * std::max<int64_t>(S, 1) * 4)));
}

}  // namespace

// Attention as GEMMs: gather the visible keys (one contiguous bf16 block), then per KV head a strided batch over
// its query heads: scores = Q K^T (f32), a masked softmax to bf16 probabilities, out = P V. Query rows go in chunks
// so the scores stay under 256 MiB.
void attention_gemm_cublas(const CublasCtx& ctx, const Tensor& q, int64_t q_pos0, const CachedKv& cached,
                           const Tensor& k_fresh, const Tensor& v_fresh, int64_t fresh_pos0, bool causal,
                           int64_t window, Tensor& out) {
  const int64_t T = q.shape[0], nH = q.shape[1], D = q.shape[2], nKV = k_fresh.shape[1], g = nH / nKV;
  const int64_t n_cached = cached.to - cached.from, n_fresh = k_fresh.shape[0], S = n_cached + n_fresh;
  DG_CHECK(n_cached == 0 || n_fresh == 0 || cached.to == fresh_pos0, "attention: keys are not contiguous");
  const int64_t key_pos0 = n_cached > 0 ? cached.from : fresh_pos0;
  Tensor kb = ctx.alloc(DType::kBF16, Shape{S, nKV, D}), vb = ctx.alloc(DType::kBF16, Shape{S, nKV, D});
  check(attention_gather_cuda(cached, k_fresh.data, v_fresh.data, n_fresh, nKV * D, kb.data, vb.data, ctx.stream));
  const int64_t qc = rows_per_chunk(T, nH, S, int64_t{256} << 20);
  const float one = 1.0f, zero = 0.0f;
  const auto* qp = static_cast<const uint16_t*>(q.data);
  auto* op = static_cast<uint16_t*>(out.data);
  const auto* kp = static_cast<const uint16_t*>(kb.data);
  const auto* vp = static_cast<const uint16_t*>(vb.data);
  for (int64_t c0 = 0; c0 < T; c0 += qc) {
    const int64_t rows = std::min(qc, T - c0);
    Tensor sc = ctx.alloc(DType::kF32, Shape{nH, rows, S}), pr = ctx.alloc(DType::kBF16, Shape{nH, rows, S});
    attention_scores(ctx, qp, kp, c0, rows, nH, nKV, D, S, sc.f32());
    check(attention_softmax_cuda(sc.f32(), nH, rows, S, q_pos0 + c0, key_pos0, causal, window, pr.data, ctx.stream));
    const auto* pp = static_cast<const uint16_t*>(pr.data);
    for (int64_t h = 0; h < nKV; ++h)
      check(cublasGemmStridedBatchedEx(ctx.blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(D), static_cast<int>(rows),
                                       static_cast<int>(S), &one, vp + h * D, CUDA_R_16BF,
                                       static_cast<int>(nKV * D), 0, pp + h * g * rows * S, CUDA_R_16BF,
                                       static_cast<int>(S), rows * S, &zero, op + (c0 * nH + h * g) * D,
                                       CUDA_R_16BF, static_cast<int>(nH * D), D, static_cast<int>(g),
                                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "attention output");
  }
}

// Top-k attention: the same gathered keys and scores, then the selection kernel (softmax and P V over each row's
// kept keys) writes the chunk's output rows.
void attention_topk_cublas(const CublasCtx& ctx, const Tensor& q, int64_t q_pos0, const CachedKv& cached,
                           const Tensor& k_fresh, const Tensor& v_fresh, int64_t fresh_pos0, bool causal,
                           int64_t window, const AttnTopk& topk, Tensor& out) {
  const int64_t T = q.shape[0], nH = q.shape[1], D = q.shape[2], nKV = k_fresh.shape[1];
  const int64_t n_cached = cached.to - cached.from, n_fresh = k_fresh.shape[0], S = n_cached + n_fresh;
  DG_CHECK(n_cached == 0 || n_fresh == 0 || cached.to == fresh_pos0, "attention: keys are not contiguous");
  const int64_t key_pos0 = n_cached > 0 ? cached.from : fresh_pos0;
  Tensor kb = ctx.alloc(DType::kBF16, Shape{S, nKV, D}), vb = ctx.alloc(DType::kBF16, Shape{S, nKV, D});
  check(attention_gather_cuda(cached, k_fresh.data, v_fresh.data, n_fresh, nKV * D, kb.data, vb.data, ctx.stream));
  const int64_t qc = rows_per_chunk(T, nH, S, kTopkScoreBytes);
  const auto* qp = static_cast<const uint16_t*>(q.data);
  auto* op = static_cast<uint16_t*>(out.data);
  for (int64_t c0 = 0; c0 < T; c0 += qc) {
    const int64_t rows = std::min(qc, T - c0);
    Tensor sc = ctx.alloc(DType::kF32, Shape{nH, rows, S});
    attention_scores(ctx, qp, static_cast<const uint16_t*>(kb.data), c0, rows, nH, nKV, D, S, sc.f32());
    check(attention_topk_select_cuda(sc.f32(), vb.data, nH, rows, S, nKV, D, q_pos0 + c0, key_pos0, causal, window,
                                     topk, op + c0 * nH * D, ctx.stream));
  }
}

// The MoE expert products through cuBLAS's grouped GEMM: one problem per expert with routed rows (needs the
// group offsets on the host). y[i] = x[i] W_e^T for i in expert e's rows.
void grouped_gemm_cublas(const CublasCtx& ctx, const void* x, int64_t K, const void* W, int64_t N,
                         const std::vector<int32_t>& off, void* y) {
  std::vector<const void*> a, b;
  std::vector<void*> c;
  std::vector<int> m, n, k, lda, ldb, ldc, sizes;
  std::vector<cublasOperation_t> ta, tb;
  std::vector<float> alpha, beta;
  const auto* xp = static_cast<const uint16_t*>(x);
  const auto* wp = static_cast<const uint16_t*>(W);
  auto* yp = static_cast<uint16_t*>(y);
  for (size_t e = 0; e + 1 < off.size(); ++e) {
    const int rows = off[e + 1] - off[e];
    if (rows == 0) continue;
    a.push_back(wp + static_cast<int64_t>(e) * N * K);
    b.push_back(xp + static_cast<int64_t>(off[e]) * K);
    c.push_back(yp + static_cast<int64_t>(off[e]) * N);
    ta.push_back(CUBLAS_OP_T);
    tb.push_back(CUBLAS_OP_N);
    m.push_back(static_cast<int>(N));
    n.push_back(rows);
    k.push_back(static_cast<int>(K));
    lda.push_back(static_cast<int>(K));
    ldb.push_back(static_cast<int>(K));
    ldc.push_back(static_cast<int>(N));
    sizes.push_back(1);
    alpha.push_back(1.0f);
    beta.push_back(0.0f);
  }
  if (sizes.empty()) return;
  const int64_t G = static_cast<int64_t>(sizes.size());
  Tensor ptrs = ctx.alloc(DType::kU8, Shape{3 * G * static_cast<int64_t>(sizeof(void*))});
  std::vector<const void*> all(a);
  all.insert(all.end(), b.begin(), b.end());
  all.insert(all.end(), c.begin(), c.end());
  check(cudaMemcpyAsync(ptrs.data, all.data(), all.size() * sizeof(void*), cudaMemcpyHostToDevice, ctx.stream),
        "grouped pointers");
  auto** dev = static_cast<void**>(ptrs.data);
  check(cublasGemmGroupedBatchedEx(ctx.blas, ta.data(), tb.data(), m.data(), n.data(), k.data(), alpha.data(),
                                   const_cast<const void* const*>(dev), CUDA_R_16BF, lda.data(),
                                   const_cast<const void* const*>(dev + G), CUDA_R_16BF, ldb.data(), beta.data(),
                                   dev + 2 * G, CUDA_R_16BF, ldc.data(), static_cast<int>(G), sizes.data(),
                                   CUBLAS_COMPUTE_32F),
        "grouped gemm");
  check(cudaStreamSynchronize(ctx.stream), "grouped gemm sync");  // the host arrays must outlive the call
}

void gemm_xwt_cublas(cublasHandle_t blas, const void* x, int64_t M, int64_t K, const void* W, int64_t N, void* y,
                     cudaDataType ytype) {
  const float one = 1.0f, zero = 0.0f;
  check(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M), static_cast<int>(K),
                     &one, W, CUDA_R_16BF, static_cast<int>(K), x, CUDA_R_16BF, static_cast<int>(K), &zero, y, ytype,
                     static_cast<int>(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "gemm");
}

}  // namespace dg
