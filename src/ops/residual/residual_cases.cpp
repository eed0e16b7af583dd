// Cases of the residual chains (src/ops/residual/residual.h), against the twin's composition of rmsnorm, add and
// scale: residual_norms (rows, dim; three normed copies of h1, the last without scale) and ffn_tail (rows, dim,
// scalar; with split and scalar2, one scalar for the rows before the split and another after). Rows of a multiple
// of 8 up to 4,096 take the CUDA kernels' 16-byte vector path, other rows the shared-memory one. The products that
// feed a chain as one op: linear_residual_norms (rows, in, dim: the o projection) and linear_moe_ffn_tail (rows,
// hidden, ff, experts, top_k: the MoE; in: the dense down projection's input; scalar), their weight in the case's
// format (fp8 with act8: W8A8; on_load: the chain applies the scales).
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

// A product into a chain: the product's difference (the GEMM bound: 2^-7 relative between the two sides' bf16
// roundings, the order term) is normed away up to its relative size, then the chain's own.
constexpr Bound kCudaProductChain{
    .of_peak = 0x1p-5, .min_cosine = 0.9999,
    .basis = "the product within its GEMM bound (each side rounds it to bf16 once: within 2^-7 relative between "
             "them), which the chain's first norm keeps relative, then the chain's bound",
    .measured = "Backends/OpConformance (H200, 2026-12-05, commit e870b63): linear_residual_norms worst/bound 0.155 "
                "(26B-A4B sliding o_proj, out1: max_abs 3.1e-2, cosine 0.99999999), the small cases and the bf16 "
                "linear_moe_ffn_tail case bit-identical to the composition"};
// W8A8 into a chain: the same E4M3 inputs; the raw sum rounded to bf16 before its scales (on load) or the scaled
// sum after them (the pass and the twin): within 2^-7 relative between sides, plus the tensor cores' partial sums.
constexpr Bound kCudaA8Chain{
    .of_peak = 0x1p-5, .min_cosine = 0.9995,
    .basis = "the same E4M3 inputs on both sides; each product rounded to bf16 once (on load: its raw sum, before the "
             "two scales; the twin: after them), within 2^-7 relative between them, the e4m3 tensor cores' partial "
             "sums within 2^-12 of the sum of |products|; the chain's first norm keeps that relative",
    .measured = "Backends/OpConformance (H200, 2026-12-05, commit e870b63): the pass 0.19 (linear_residual_norms "
                "77 x 256 -> 320) and 0.18 (linear_moe_ffn_tail); scales on load 0.30 (26B-A4B o_proj, max_abs "
                "6.3e-2), 0.42 (linear_moe_ffn_tail, 37 rows: max_abs 6.3e-2) and 0.32 (its 26B-A4B canvas: max_abs "
                "4.7e-2); cosine >= 0.99999"};

OpCase fed(const char* op, std::string name, CaseParams p, DType w = DType::kBF16, bool real = false) {
  const Bound& cuda = w == DType::kFp8 ? kCudaA8Chain : kCudaProductChain;
  return {"residual", op, std::move(name), std::move(p), w, real, false, {{"cuda", "", cuda}}};
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
      // Encoder rows then decoder rows (a committed block in the next step's forward): two layer scalars.
      chain("ffn_tail", "26B-A4B commit + canvas", {{"rows", 512}, {"dim", 2816}, {"scalar", 0.37}, {"split", 256},
                                                    {"scalar2", 1.9}}),
      chain("ffn_tail", "65 x 1000, split at 20", {{"rows", 65}, {"dim", 1000}, {"scalar", 2.5}, {"split", 20},
                                                   {"scalar2", 0.6}}),
      fed("linear_residual_norms", "7 x 64 -> 72", {{"rows", 7}, {"in", 64}, {"dim", 72}}),
      fed("linear_residual_norms", "26B-A4B sliding o_proj", {{"rows", 256}, {"in", 4096}, {"dim", 2816}},
          DType::kBF16, true),
      fed("linear_residual_norms", "fp8 W8A8 77 x 256 -> 320", {{"rows", 77}, {"in", 256}, {"dim", 320}, {"act8", 1}},
          DType::kFp8),
      fed("linear_residual_norms", "fp8 W8A8 77 x 256 -> 320, scales on load",
          {{"rows", 77}, {"in", 256}, {"dim", 320}, {"act8", 1}, {"on_load", 1}}, DType::kFp8),
      fed("linear_residual_norms", "fp8 W8A8 26B-A4B sliding o_proj, scales on load",
          {{"rows", 256}, {"in", 4096}, {"dim", 2816}, {"act8", 1}, {"on_load", 1}}, DType::kFp8, true),
      fed("linear_moe_ffn_tail", "37 rows, top 3 of 5",
          {{"rows", 37}, {"hidden", 96}, {"ff", 64}, {"experts", 5}, {"top_k", 3}, {"in", 48}, {"scalar", 0.8}}),
      fed("linear_moe_ffn_tail", "37 rows, top 3 of 5, split at 11",
          {{"rows", 37}, {"hidden", 96}, {"ff", 64}, {"experts", 5}, {"top_k", 3}, {"in", 48}, {"scalar", 0.8},
           {"split", 11}, {"scalar2", 1.3}}),
      fed("linear_moe_ffn_tail", "fp8 W8A8 37 rows, top 3 of 5",
          {{"rows", 37}, {"hidden", 96}, {"ff", 64}, {"experts", 5}, {"top_k", 3}, {"in", 64}, {"scalar", 0.8},
           {"act8", 1}}, DType::kFp8),
      fed("linear_moe_ffn_tail", "fp8 W8A8 37 rows, top 3 of 5, scales on load",
          {{"rows", 37}, {"hidden", 96}, {"ff", 64}, {"experts", 5}, {"top_k", 3}, {"in", 64}, {"scalar", 0.8},
           {"act8", 1}, {"on_load", 1}}, DType::kFp8),
      fed("linear_moe_ffn_tail", "fp8 W8A8 26B-A4B canvas, scales on load",
          {{"rows", 256}, {"hidden", 2816}, {"ff", 704}, {"experts", 128}, {"top_k", 8}, {"in", 2112},
           {"scalar", 0.37}, {"act8", 1}, {"on_load", 1}}, DType::kFp8, true),
  };
}

}  // namespace dg
