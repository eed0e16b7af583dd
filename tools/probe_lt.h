// The cuBLASLt problem the probes time (gemm_lt_probe.cpp, gemm_fp8_probe.cpp): y[rows, n] = x[rows, k] W[n, k]^T
// as the engine runs it, the column-major "TN" form (W's [k, n] view transposed times x's [k, rows]), f32 compute,
// and a preference for at most `workspace` bytes (and, with `f32_split_k`, split-K parts summed in f32 only).
#pragma once

#include <cublasLt.h>

#include <cstdint>

#include "probe_common.h"

namespace dg_probe {

struct LtProblem {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;

  LtProblem(cudaDataType_t in, cudaDataType_t out, int n, int k, int rows, uint64_t workspace, bool f32_split_k) {
    ok(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    ok(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa");
    ok(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb");
    ok(cublasLtMatrixLayoutCreate(&a, in, k, n, k), "layout a");
    ok(cublasLtMatrixLayoutCreate(&b, in, k, rows, k), "layout b");
    ok(cublasLtMatrixLayoutCreate(&c, out, n, rows, n), "layout c");
    ok(cublasLtMatmulPreferenceCreate(&pref), "pref");
    ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                            sizeof workspace), "pref workspace");
    if (f32_split_k) {
      const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
      ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                              sizeof schemes), "pref reduction");
    }
  }
  ~LtProblem() {
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(c);
    cublasLtMatmulDescDestroy(op);
  }
  LtProblem(const LtProblem&) = delete;
  LtProblem& operator=(const LtProblem&) = delete;
};

}  // namespace dg_probe
