// cuBLASLt's e4m3 product (see fp8_gemm.h). Row-major acc [rows, n] = x wᵀ is, column-major, accᵀ [n, rows] =
// op_T(W) X with W the [k, n] and X the [k, rows] column-major views of the row-major arrays: the "TN" form cuBLASLt
// requires for fp8.
#include "backend/cuda/fp8_gemm.h"

#include "core/error.h"
#include "ops/linear/e4m3_rows_cuda.h"

namespace dg {
namespace {

void lt_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) fail("cuBLASLt error {} in {}", static_cast<int>(s), what);
}

// The largest power of two up to 256 that divides the address.
uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && a % al != 0) al /= 2;
  return al;
}

template <class T>
void set_pref(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, const T& v, const char* what) {
  lt_check(cublasLtMatmulPreferenceSetAttribute(p, attr, &v, sizeof v), what);
}

template <class T>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v, const char* what) {
  lt_check(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof v), what);
}

}  // namespace

Fp8Gemm::Fp8Gemm(void* workspace, size_t workspace_bytes) : ws_(workspace), ws_bytes_(workspace_bytes) {
  lt_check(cublasLtCreate(&lt_), "cublasLtCreate");
}

Fp8Gemm::~Fp8Gemm() {
  for (auto& [key, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.d);
    cublasLtMatmulDescDestroy(p.desc);
  }
  cublasLtDestroy(lt_);
}

Fp8Gemm::Plan& Fp8Gemm::plan(int64_t rows, int64_t k, int64_t n, cudaDataType out, int64_t ld, const void* wq,
                             const void* xq, const void* d) {
  const uint32_t align_w = alignment(wq), align_x = alignment(xq), align_d = alignment(d);
  const auto key = std::make_tuple(rows, k, n, static_cast<int>(out), ld, align_w, align_x, align_d);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  Plan p;
  lt_check(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "fp8 matmul desc");
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T, "fp8 transa");
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N, "fp8 transb");
  lt_check(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k),
           "fp8 weight layout");
  lt_check(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, static_cast<uint64_t>(k), static_cast<uint64_t>(rows), k),
           "fp8 activation layout");
  lt_check(cublasLtMatrixLayoutCreate(&p.d, out, static_cast<uint64_t>(n), static_cast<uint64_t>(rows), ld),
           "fp8 output layout");
  cublasLtMatmulPreference_t pref = nullptr;
  lt_check(cublasLtMatmulPreferenceCreate(&pref), "fp8 preference");
  const uint64_t ws = ws_bytes_;
  set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ws, "fp8 workspace preference");
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_w, "fp8 weight alignment");
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_x, "fp8 activation alignment");
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_d, "fp8 output alignment");
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d, "fp8 output alignment");
  if (out != CUDA_R_32F) {  // split-K parts summed in f32, never in the bf16 output (one rounding per element)
    const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    set_pref(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, schemes, "fp8 reduction schemes");
  }
  constexpr int kCandidates = 8;  // as many as before the tuning switch went, so the first is the same algorithm
  cublasLtMatmulHeuristicResult_t got[kCandidates]{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lt_, p.desc, p.a, p.b, p.d, p.d, pref, kCandidates, got, &found);
  int first = 0;
  while (first < found && got[first].state != CUBLAS_STATUS_SUCCESS) ++first;
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || first == found) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.d);
    cublasLtMatmulDescDestroy(p.desc);
    fail("cuBLASLt offers no e4m3 product for [{} x {}] x [{} x {}]^T into {} on this GPU (status {}); run with "
         "--linear-act bf16 and --vocab-act bf16{}", rows, k, n, k, out == CUDA_R_16BF ? "bf16" : "f32",
         static_cast<int>(st), out == CUDA_R_16BF ? ", or bench with --a8-scales-pass" : "");
  }
  p.algo = got[first].algo;
  return plans_.emplace(key, p).first->second;
}

void Fp8Gemm::run(const void* xq, int64_t rows, int64_t k, const void* wq, int64_t n, float* acc, cudaStream_t s) {
  matmul(xq, rows, k, wq, n, acc, CUDA_R_32F, n, s);
}

void Fp8Gemm::run_bf16(const void* xq, int64_t rows, int64_t k, const void* wq, int64_t n, void* out, int64_t ld,
                       cudaStream_t s) {
  DG_CHECK(ld >= n && ld % 8 == 0, "fp8 product: a bf16 output's row stride {} must be at least its {} columns and a "
           "multiple of 8", ld, n);
  matmul(xq, rows, k, wq, n, out, CUDA_R_16BF, ld, s);
}

void Fp8Gemm::matmul(const void* xq, int64_t rows, int64_t k, const void* wq, int64_t n, void* out, cudaDataType type,
                     int64_t ld, cudaStream_t s) {
  DG_CHECK(fp8_gemm_shape_ok(k, n), "fp8 product: widths {} and {} must be multiples of 16 (run with --linear-act "
           "bf16 and --vocab-act bf16)", k, n);
  if (rows == 0) return;
  if ((type == CUDA_R_32F ? own_f32_ : own_bf16_) && rows <= kE4m3RowsMax &&
      e4m3_rows_takes(rows, k, n, xq, wq, out, type == CUDA_R_32F, ld).is_ok()) {
    const Status st = linear_e4m3_rows_cuda(xq, rows, k, wq, n, out, type == CUDA_R_32F, ld, s);
    DG_CHECK(st.is_ok(), "{}", st.message());
    ++own_products_;
    return;
  }
  Plan& p = plan(rows, k, n, type, ld, wq, xq, out);
  const float one = 1.0f, zero = 0.0f;
  lt_check(cublasLtMatmul(lt_, p.desc, &one, wq, p.a, xq, p.b, &zero, out, p.d, out, p.d, &p.algo, ws_, ws_bytes_, s),
           "fp8 product");
}

}  // namespace dg
