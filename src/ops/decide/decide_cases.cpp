// Cases of decide (src/ops/decide/decide.h) through the Decider: a canvas of `rows` ids over `vocab`, `steps` steps
// on seeded logits (every other row a near-certain one, so rows are accepted and stop rules can fire), argmax or
// categorical commit; canvases, statistics and statuses after every step are compared.
#include "ops/op_cases.h"

namespace dg {
namespace {

constexpr Bound kCudaDecide{
    .exact = true,
    .basis = "the same decisions bit for bit: the accept's f32 cumsum and the f64 entropy sum in the CPU's order, the "
             "stop rule one host+device function, LCG draws from exact u64 maps",
    .measured = "CudaDecide.* and CudaDeviceDecisions.* (H200, 2026-11-30, commit cb1dfe9): uniforms, canvas, status "
                "and state bit-identical to the twin on 1 to 1,024 rows; generate() gives the host's tokens"};

// The f32 statistics the decisions read (mean entropy, each row's entropy and p_max) come from the backend's row
// statistics: row_stats' bound. Rows of near-certain logits have entropies near 1e-13, whose last bits the GPU's
// expf and logf move; the decisions above stay exact.
constexpr Bound kCudaDecideStats{
    .abs = 1e-5,
    .rel = 1e-5,
    .basis = "the row statistics' bound (row_stats_cases.cpp): f32 softmax sums in another order and the GPU's "
             "expf/logf, an ulp or two of each term",
    .measured = "Backends/OpConformance (H200, 2026-12-02, commit bc57000): worst max_abs 3.8e-12 (26B-A4B canvas; "
                "3.8e-7 of the bound); every decision (canvas, accepted, stop, step, LCG state) equal in all 6 "
                "cases"};

OpCase decide(std::string name, int64_t rows, int64_t vocab, bool categorical, bool real = false) {
  return {"decide", "decide", std::move(name),
          {{"rows", rows}, {"vocab", vocab}, {"categorical", categorical ? 1 : 0}, {"steps", 4}},
          DType::kBF16, real, false, {{"cuda", "decisions", kCudaDecide}, {"cuda", "statistics", kCudaDecideStats}}};
}

}  // namespace

std::vector<OpCase> decide_cases() {
  return {decide("one row", 1, 64, false),         decide("7 rows, categorical", 7, 512, true),
          decide("111 rows", 111, 4096, false),    decide("dg-tiny canvas, categorical", 64, 4096, true),
          decide("26B-A4B canvas", 256, 262144, false, true),
          decide("largest canvas, categorical", 1024, 8192, true, true)};
}

}  // namespace dg
