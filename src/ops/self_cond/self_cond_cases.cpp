// Cases of soft_embed (src/ops/self_cond/self_cond.h): tempered logits [rows, vocab] in the activation storage, the
// table [vocab, hidden] (or fp8 rows of its transpose: --vocab-act fp8), the survivor cutoff (0: exact).
#include "ops/op_cases.h"

namespace dg {
namespace {

constexpr Bound kCudaSoftEmbed{
    .of_peak = 0x1p-6,
    .min_cosine = 0.9999,
    .basis = "probabilities rounded to bf16 on both sides from f32 softmaxes summed in different orders (one ulp, "
             "2^-7 relative at most: SoftProbsCuda measured 0.97 of that bound), a probability on the cutoff "
             "boundary zeroed on one side only (below cutoff * p_max), then a bf16 GEMM over the vocabulary with f32 "
             "accumulation and the product rounded to bf16 before and after the embedding scale",
    .measured = "Backends/OpConformance (H200, 2026-12-02, commit 59de0e2): worst 0.54 of the bound (odd 7 x 989 -> 111: max_abs 1.6e-2), cosine >= 0.999996 in "
                "all 9 cases"};

// The fp8 table (each side's fp8_table of the transpose: the GPU's transpose and quantiser give encode_rows' codes)
// and fp8 probabilities.
constexpr Bound kCudaSoftEmbedA8{
    .of_peak = 0x1p-5,
    .min_cosine = 0.999,
    .basis = "the probabilities one bf16 ulp apart between the sides (as the bf16 table's bound) and so is each row's "
             "scale, which moves a probability's E4M3 code by one step (2^-4 relative) where it lay near a rounding "
             "boundary (the GPU multiplies by the scale's reciprocal: within an f32 ulp of the twin's division); the "
             "same fp8 table; the e4m3 tensor cores' partial sums kept to about 14 bits before "
             "cuBLASLt promotes them; the product rounded to bf16 before and after the embedding scale",
    .measured = "Backends/OpConformance (H200, 2026-12-03, commits 28a8eb9 and 81385fa, the same values): worst 0.22 "
                "of the bound (26B-A4B canvas over the full vocabulary: max_abs 7.8e-3), tiny_a 0.087, dg-tiny with "
                "survivors 0.089; cosine >= 0.9999995 in all 3 cases"};
constexpr Bound kCudaSoftEmbedA8Refused{
    .refused = "the CUDA e4m3 product takes a hidden size and vocabulary that are multiples of 16 (fp8_table)"};

OpCase soft(std::string name, int64_t rows, int64_t vocab, int64_t hidden, double cutoff, bool real = false,
            DType table = DType::kBF16) {
  const bool fp8 = table == DType::kFp8;
  const Bound& cuda = !fp8 ? kCudaSoftEmbed : vocab % 16 != 0 || hidden % 16 != 0 ? kCudaSoftEmbedA8Refused
                                                                                 : kCudaSoftEmbedA8;
  return {"self_cond", "soft_embed", std::move(name),
          {{"rows", rows}, {"vocab", vocab}, {"hidden", hidden}, {"cutoff", cutoff}},
          table, real, false, {{"cuda", "", cuda}}};
}

constexpr double kSurvivors = 4.54e-5;  // e^-10, the seed's survivor cutoff

}  // namespace

std::vector<OpCase> self_cond_cases() {
  return {soft("odd 7 x 989 -> 111", 7, 989, 111, 0.0),
          soft("one row, vocab 7", 1, 7, 16, 0.0),
          soft("tiny_a canvas", 16, 512, 64, 0.0),
          soft("tiny_a canvas, survivors", 16, 512, 64, kSurvivors),
          soft("dg-tiny vocabulary", 8, 4096, 128, kSurvivors),
          // One row cut into many slices (soft_probs_slices), the last one ragged: the per-row merge of the slices.
          soft("one row, odd vocabulary 100,003 in slices", 1, 100003, 8, 0.0),
          soft("3 rows, odd vocabulary 50,001 in slices, survivors", 3, 50001, 8, kSurvivors),
          soft("26B-A4B full vocabulary, 8 rows", 8, 262144, 2816, 0.0, true),
          soft("26B-A4B full vocabulary, 8 rows, survivors", 8, 262144, 2816, kSurvivors, true),
          soft("fp8 table, tiny_a canvas", 16, 512, 64, 0.0, false, DType::kFp8),
          soft("fp8 table, dg-tiny vocabulary, survivors", 8, 4096, 128, kSurvivors, false, DType::kFp8),
          soft("fp8 table, vocabulary 1,000 (not a multiple of 16)", 2, 1000, 32, 0.0, false, DType::kFp8),
          soft("fp8 table, 26B-A4B canvas, full vocabulary", 256, 262144, 2816, 0.0, true, DType::kFp8)};
}

}  // namespace dg
