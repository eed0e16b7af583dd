// Cases of lm_head (src/ops/logits/logits.h): y [rows, hidden] against the tied table [vocab, hidden], then the
// softcap (0: none); the table bf16, or fp8 rows of it (--vocab-act fp8: a W8A8 product).
#include "ops/op_cases.h"

namespace dg {
namespace {

constexpr Bound kCudaLogits{
    .rel = 0x1p-7,
    .rel_sum = 0x1p-14,
    .min_cosine = 0.99999,
    .basis = "the product as a bf16 GEMM with f32 accumulation (cuBLAS) against the twin's f32 dot products, each "
             "rounded to bf16 before the softcap: one bf16 rounding per side (2^-8 relative each) plus the "
             "accumulation order (2^-14 of the sum of |products|, the streaming kernel's measured bound); the "
             "softcap's slope is at most 1",
    .measured = "Backends/OpConformance (H200, 2026-12-02, commit 59de0e2): worst 0.78 of the bound (26B-A4B full vocabulary, 8 rows: max_abs 9.5e-2), cosine "
                ">= 0.99999999 in all 6 cases"};

// An fp8 table (Backend::fp8_table on each side: the GPU's quantiser is the twin's encode_rows) and fp8 rows of y.
constexpr Bound kCudaLogitsA8{
    .rel = 0x1p-7,
    .rel_sum = 0x1p-12,
    .min_cosine = 0.9999,
    .basis = "the same E4M3 inputs on both sides; the product's sum rounded to bf16 once on each side (2^-8 relative "
             "between them), the e4m3 tensor cores' partial sums kept to about 14 bits before cuBLASLt promotes them "
             "to f32 (2^-12 of the sum of |products|, as the W8A8 linears); the softcap's slope is at most 1",
    .measured = "Backends/OpConformance (H200, 2026-12-03, commit 28a8eb9): worst 0.91 of the bound (16 x 64 -> 512: "
                "max_abs 1.6e-2), the 26B-A4B canvas over 8,192 of the vocabulary 0.58 and the full vocabulary 0.57 "
                "(max_abs 9.5e-2); cosine >= 0.9999998 in all 3 cases"};
constexpr Bound kCudaLogitsA8Refused{
    .refused = "the CUDA e4m3 product takes a hidden size and vocabulary that are multiples of 16 (fp8_table)"};

OpCase logits(std::string name, int64_t rows, int64_t hidden, int64_t vocab, double softcap, bool real = false,
              DType table = DType::kBF16) {
  const Bound& cuda = table == DType::kBF16 ? kCudaLogits : vocab % 16 != 0 ? kCudaLogitsA8Refused : kCudaLogitsA8;
  return {"logits", "lm_head", std::move(name),
          {{"rows", rows}, {"hidden", hidden}, {"vocab", vocab}, {"softcap", softcap}},
          table, real, false, {{"cuda", "", cuda}}};
}

}  // namespace

std::vector<OpCase> logits_cases() {
  return {logits("odd 7 x 111 -> 989", 7, 111, 989, 30.0),
          logits("odd, no softcap", 7, 111, 989, 0.0),
          logits("tiny_a canvas", 16, 64, 512, 30.0),
          logits("tiny_b canvas", 8, 32, 640, 30.0),
          logits("26B-A4B canvas over 8,192 of the vocabulary", 256, 2816, 8192, 30.0, true),
          logits("26B-A4B full vocabulary, 8 rows", 8, 2816, 262144, 30.0, true),
          logits("fp8 table 16 x 64 -> 512", 16, 64, 512, 30.0, false, DType::kFp8),
          logits("fp8 table 7 x 32 -> 1,000 (vocabulary not a multiple of 16)", 7, 32, 1000, 30.0, false,
                 DType::kFp8),
          logits("fp8 table 26B-A4B canvas over 8,192 of the vocabulary", 256, 2816, 8192, 30.0, true, DType::kFp8),
          logits("fp8 table 26B-A4B full vocabulary, 8 rows", 8, 2816, 262144, 30.0, true, DType::kFp8)};
}

}  // namespace dg
