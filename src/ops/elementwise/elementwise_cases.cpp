// Cases of the elementwise ops (src/ops/elementwise/elementwise.h): add and scale over [rows, cols], and the
// synthetic weights' fill (n elements from `seed`, uniform in offset +- scale; backends that synthesise weights).
#include "ops/op_cases.h"

namespace dg {
namespace {

constexpr Bound kCudaSameOp{
    .exact = true,
    .basis = "one f32 add or multiply of the same bf16 values, rounded once to bf16, on both sides",
    .measured = "Backends/OpConformance (H200, 2026-12-02, commit 59de0e2): add and scale bit for bit in every case (max_abs 0)"};
constexpr Bound kCudaFill{
    .exact = true,
    .basis = "the same generator function on both sides (synthetic_uniform.h), two separately rounded f32 operations",
    .measured = "SyntheticUniformCuda.KernelMatchesTheCpuTwinBitForBit (H200): bit for bit"};

OpCase op(const char* name_of_op, std::string name, CaseParams p, const Bound& cuda) {
  return {"elementwise", name_of_op, std::move(name), std::move(p), DType::kBF16, false, false, {{"cuda", "", cuda}}};
}

}  // namespace

std::vector<OpCase> elementwise_cases() {
  return {
      op("add", "1 x 7", {{"rows", 1}, {"cols", 7}}, kCudaSameOp),
      op("add", "111 x 989", {{"rows", 111}, {"cols", 989}}, kCudaSameOp),
      op("add", "26B-A4B canvas", {{"rows", 256}, {"cols", 2816}}, kCudaSameOp),
      op("scale", "7 x 111", {{"rows", 7}, {"cols", 111}, {"s", 0.37}}, kCudaSameOp),
      op("scale", "26B-A4B canvas", {{"rows", 256}, {"cols", 2816}, {"s", 1.7}}, kCudaSameOp),
      op("fill_uniform", "989 norms near 1", {{"n", 989}, {"seed", 7}, {"scale", 0.52}, {"offset", 1.0}}, kCudaFill),
      op("fill_uniform", "a 26B-A4B expert stack slice", {{"n", 1 << 20}, {"seed", 7000023}, {"scale", 0.26},
                                                         {"offset", 0.0}}, kCudaFill),
  };
}

}  // namespace dg
