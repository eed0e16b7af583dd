// Cases of moe (src/ops/moe/moe.h): rows, hidden, ff (expert_ff), experts, top_k, act_fp8 (1: the W8A8 products of
// fp8 experts); the experts' format is the case's weights. The router's inputs are built with wide margins between
// the top_k-th and the next expert of every row, so both sides route alike and only the arithmetic differs.
#include "ops/op_cases.h"

namespace dg {
namespace {

constexpr const char* kPipelineBasis =
    "routing identical (wide margins); the expert pipeline's bound as measured for the stream kernel "
    "(MoeStreamCuda.PipelineMatchesMoeExpertsCpu, a priori: an f32 order difference flips a bf16 rounding of g, u, "
    "the activation or an expert output by one ulp) plus the routing weights from bf16 router scores, which move "
    "an output by 2^-8 of itself at most";

constexpr const char* kMoeMeasured =
    "Backends/OpConformance (H200, 2026-12-02, commit 59de0e2): worst 0.31 of the bound (26B-A4B canvas, nvfp4: max_abs 0.125), cosine >= 0.99998 over all 15 "
    "cases (q4's 26B-A4B canvas 0.14)";
constexpr Bound kCudaMoe{.of_peak = 0x1p-6, .min_cosine = 0.9999, .basis = kPipelineBasis, .measured = kMoeMeasured};
// q4 feeds bf16-rounded weights; fp8 activations may move an E4M3 code by a step where a bf16 ulp of difference
// sits on a rounding boundary (the pipeline's measured bounds for those: 2^-5, 0.9995).
constexpr Bound kCudaMoeLoose{.of_peak = 0x1p-5, .min_cosine = 0.9995, .basis = kPipelineBasis,
                               .measured = kMoeMeasured};
constexpr Bound kMoeCudaNoQ6{.refused = "the CUDA backend has no q6 kernel: refused at upload (docs/FORMATS.md)"};

OpCase moe(std::string name, int64_t rows, int64_t hidden, int64_t ff, int64_t experts, int64_t top_k,
           DType w = DType::kBF16, bool act_fp8 = false, bool real = false) {
  const Bound& cuda = w == DType::kQ6 ? kMoeCudaNoQ6 : (w == DType::kQ4 || act_fp8) ? kCudaMoeLoose : kCudaMoe;
  return {"moe", "moe", std::move(name),
          {{"rows", rows}, {"hidden", hidden}, {"ff", ff}, {"experts", experts}, {"top_k", top_k},
           {"act_fp8", act_fp8 ? 1 : 0}},
          w, real, false, {{"cuda", "", cuda}}};
}

}  // namespace

std::vector<OpCase> moe_cases() {
  return {
      moe("one row", 1, 64, 32, 8, 2),
      moe("tiny_a", 16, 64, 32, 8, 2),
      moe("tiny_b, top 4 of 16", 8, 32, 24, 16, 4),
      moe("dg-tiny", 64, 128, 64, 8, 2),
      moe("odd rows and experts", 37, 72, 24, 5, 3),
      moe("widths not multiples of 8", 7, 111, 13, 5, 3),
      moe("q4 experts", 37, 96, 64, 5, 3, DType::kQ4),
      moe("q6 experts", 37, 96, 64, 5, 3, DType::kQ6),
      moe("q8 experts", 37, 96, 64, 5, 3, DType::kQ8),
      moe("fp8 experts", 37, 96, 64, 5, 3, DType::kFp8),
      moe("fp8 experts, fp8 activations", 37, 96, 64, 5, 3, DType::kFp8, true),
      moe("nvfp4 experts", 37, 96, 64, 5, 3, DType::kNvFp4),
      moe("26B-A4B canvas", 256, 2816, 704, 128, 8, DType::kBF16, false, true),
      moe("26B-A4B canvas, q4", 256, 2816, 704, 128, 8, DType::kQ4, false, true),
      moe("26B-A4B canvas, fp8 W8A8", 256, 2816, 704, 128, 8, DType::kFp8, true, true),
      moe("26B-A4B canvas, nvfp4", 256, 2816, 704, 128, 8, DType::kNvFp4, false, true),
  };
}

}  // namespace dg
