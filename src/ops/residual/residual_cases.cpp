// Cases of the residual chains (src/ops/residual/residual.h), against the twin's composition of rmsnorm, add and
// scale: residual_norms (rows, dim; three normed copies of h1, the last without scale) and ffn_tail (rows, dim,
// scalar). Rows of a multiple of 8 up to 4,096 take the CUDA kernels' 16-byte vector path, other rows the
// shared-memory one.
#include "ops/op_cases.h"

namespace dg {
namespace {

constexpr Bound kCudaChain{
    .of_peak = 0x1p-5,
    .min_cosine = 0.9999,
    .basis = "a different f32 order of the sums of squares flips a bf16 rounding of a stored intermediate by one "
             "ulp at most, and a flip early in the chain moves the outputs by a few ulps of the row's scale",
    .measured = "FusedNormsCuda (H200, 2026-12-01): 256 x 2816 residual_norms max_abs 7.8e-3 (h1 3.9e-3), ffn_tail "
                "7.8e-3, cosine 1.000000000; 3 x 7 and 65 x 1000 bit-identical"};

OpCase chain(const char* op, std::string name, CaseParams p) {
  return {"residual", op, std::move(name), std::move(p), DType::kBF16, false, false, {{"cuda", "", kCudaChain}}};
}

}  // namespace

std::vector<OpCase> residual_cases() {
  return {
      chain("residual_norms", "26B-A4B canvas", {{"rows", 256}, {"dim", 2816}}),
      chain("residual_norms", "3 x 7", {{"rows", 3}, {"dim", 7}}),
      chain("residual_norms", "65 x 1000", {{"rows", 65}, {"dim", 1000}}),
      chain("residual_norms", "one row of 989", {{"rows", 1}, {"dim", 989}}),
      // A multiple of 8 above the 16-byte vector path's widest row (4,096): the shared-memory path.
      chain("residual_norms", "2 x 4104", {{"rows", 2}, {"dim", 4104}}),
      chain("ffn_tail", "26B-A4B canvas", {{"rows", 256}, {"dim", 2816}, {"scalar", 0.37}}),
      chain("ffn_tail", "3 x 7", {{"rows", 3}, {"dim", 7}, {"scalar", 1.0}}),
      chain("ffn_tail", "65 x 1000", {{"rows", 65}, {"dim", 1000}, {"scalar", 2.5}}),
      chain("ffn_tail", "111 x 64", {{"rows", 111}, {"dim", 64}, {"scalar", 0.8}}),
      chain("ffn_tail", "2 x 4104", {{"rows", 2}, {"dim", 4104}, {"scalar", 1.5}}),
  };
}

}  // namespace dg
