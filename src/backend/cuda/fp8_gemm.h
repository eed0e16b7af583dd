// W8A8 dense products on the e4m3 tensor cores (sm_89+) through cuBLASLt: the sums of x_codes · w_codesᵀ, to which
// the caller applies the activation row's and the weight row's scales (cuBLASLt 13's outer-vector scaling is refused
// on the H200, status 7): f32 sums and a row-scaled pass (rowscaled_epilogue_cuda), or the raw sums rounded to bf16
// and the scales applied by the kernel that reads them (CudaKernels::a8_scales_on_load). The linears of fp8 weights
// run this when their activations are fp8 too (`--linear-act`, docs/PERFORMANCE-EARLIER.md, "The tenth session").
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "core/packed_layout.h"
#include "core/tensor.h"

namespace dg {

// The per-row f32 scales of an fp8 tensor [n, k] (device): its second plane, [n] contiguous.
inline float* fp8_scales(const Tensor& t) {
  return reinterpret_cast<float*>(static_cast<uint8_t*>(t.data) + packed_layout(DType::kFp8, t.shape).offset[1]);
}

class Fp8Gemm {
 public:
  // `workspace` (device, `workspace_bytes`) may be shared with other work ordered on the same stream.
  Fp8Gemm(void* workspace, size_t workspace_bytes);
  ~Fp8Gemm();
  Fp8Gemm(const Fp8Gemm&) = delete;
  Fp8Gemm& operator=(const Fp8Gemm&) = delete;

  // acc [rows, n] f32 = xq [rows, k] e4m3 · wq [n, k]ᵀ e4m3. k and n multiples of 16, every pointer 16-byte
  // aligned. Throws dg::Error naming the shape where cuBLASLt offers no algorithm. The heuristic's first algorithm
  // (timing its candidates changed nothing: docs/NEGATIVE.md), so the summation order is the same in every run.
  void run(const void* xq, int64_t rows, int64_t k, const void* wq, int64_t n, float* acc, cudaStream_t s);
  // The same sums rounded to bf16, row r at out + r * ld (ld >= n: the columns of a wider buffer).
  void run_bf16(const void* xq, int64_t rows, int64_t k, const void* wq, int64_t n, void* out, int64_t ld,
                cudaStream_t s);
  // Products of at most kE4m3RowsMax rows through our kernel instead of cuBLASLt (src/ops/linear/e4m3_rows_cuda.h;
  // CudaKernels::a8_rows): those with bf16 outputs, and with `f32_outputs` the f32 ones too. Calls the kernel does
  // not take (more rows; an output it cannot store) stay with cuBLASLt.
  void use_own_rows(bool bf16_outputs, bool f32_outputs) {
    own_bf16_ = bf16_outputs;
    own_f32_ = f32_outputs;
  }
  uint64_t own_products() const { return own_products_; }  // the products issued through our kernel

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};  // the heuristic's first
  };
  // The heuristic's algorithm for this shape and these pointers' alignments (each the largest power of two up to
  // 256 dividing the address: cuBLASLt otherwise assumes 256 and may pick an algorithm a less aligned output cannot
  // take, such as the second of two products written side by side).
  Plan& plan(int64_t rows, int64_t k, int64_t n, cudaDataType out, int64_t ld, const void* wq, const void* xq,
             const void* d);
  void matmul(const void* xq, int64_t rows, int64_t k, const void* wq, int64_t n, void* out, cudaDataType type,
              int64_t ld, cudaStream_t s);

  bool own_bf16_ = false, own_f32_ = false;
  uint64_t own_products_ = 0;
  cublasLtHandle_t lt_ = nullptr;
  void* ws_;
  size_t ws_bytes_;
  // by (rows, k, n, out type, ld, the alignments of the weight, the activations and the output)
  std::map<std::tuple<int64_t, int64_t, int64_t, int, int64_t, uint32_t, uint32_t, uint32_t>, Plan> plans_;
};

// Where the next of several fp8 weights [n, k] placed side by side starts, in bytes past this one's codes: its
// packed bytes (codes, row scales) rounded up to 16 code rows, so a product over the first weight's codes with n the
// span's rows reaches each at a column that is a multiple of 16 (CudaBackend::place_side_by_side).
inline int64_t fp8_group_stride(const Tensor& t) {
  const int64_t row16 = 16 * t.shape[1];
  return (static_cast<int64_t>(t.nbytes()) + row16 - 1) / row16 * row16;
}

// Whether the widths suit Fp8Gemm (both multiples of 16).
inline bool fp8_gemm_shape_ok(int64_t k, int64_t n) { return k % 16 == 0 && n % 16 == 0 && k > 0 && n > 0; }

}  // namespace dg
