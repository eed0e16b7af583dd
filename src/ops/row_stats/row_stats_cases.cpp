// Cases of row_stats and categorical (src/ops/row_stats/row_stats.h): f32 logits [rows, vocab] in [-12, 12] with
// ties for the maximum placed across the row (the lowest index must win), at temperature `temperature`;
// categorical draws one uniform per row.
#include "ops/op_cases.h"

namespace dg {
namespace {

constexpr const char* kRowStatsMeasured =
    "RowStatsCuda (H200, 2026-11-30, commit 14aa007): 3 x 37, 17 x 4,096, 5 x 70,001, 256 x 262,144 and 2,048 x 8,192 "
    "with ties across slices: argmax exact, entropy and p_max equal to the CPU's f32 values (worst difference 0), the "
    "tempered bf16 logits bit for bit, a second run bit-identical";

std::vector<CaseBound> row_stats_bounds() {
  const char* basis = "f64 sums in another order, rounded to f32: a few f32 ulps";
  const char* m = kRowStatsMeasured;
  return {{"cuda", "argmax", Bound{.exact = true, .basis = "the lowest index of the maximum", .measured = m}},
          {"cuda", "entropy", Bound{.abs = 1e-5, .basis = basis, .measured = m}},
          {"cuda", "p_max", Bound{.rel = 1e-5, .basis = basis, .measured = m}},
          {"cuda", "tempered", Bound{.exact = true, .basis = "bf16(raw / T), one true division", .measured = m}}};
}

OpCase stats(std::string name, int64_t rows, int64_t vocab, bool real = false) {
  return {"row_stats", "row_stats", std::move(name), {{"rows", rows}, {"vocab", vocab}, {"temperature", 0.8}},
          DType::kBF16, real, false, row_stats_bounds()};
}

OpCase draws(std::string name, int64_t rows, int64_t vocab, bool real = false) {
  return {"row_stats", "categorical", std::move(name), {{"rows", rows}, {"vocab", vocab}, {"temperature", 0.8}},
          DType::kBF16, real, false,
          {{"cuda", "", Bound{.exact = true,
                              .basis = "inverse CDF over f64 running sums of softmax(raw / T): the same index unless "
                                       "a uniform sits within ~1e-12 of a CDF boundary",
                              .measured = "Backends/OpConformance (H200, 2026-12-04, the three-launch kernels of categorical.cu): every "
                                          "draw equal in all 3 cases (the 26B-A4B canvas included)"}}}};
}

}  // namespace

std::vector<OpCase> row_stats_cases() {
  return {stats("tiny odd 3 x 37", 3, 37),
          stats("small 17 x 4096", 17, 4096),
          stats("odd vocab 5 x 70001", 5, 70001),
          stats("26B-A4B canvas", 256, 262144, true),
          stats("many rows 2048 x 8192", 2048, 8192, true),
          draws("3 x 37", 3, 37),
          draws("17 x 4096", 17, 4096),
          draws("26B-A4B canvas", 256, 262144, true)};
}

}  // namespace dg
