// Cases of rmsnorm, rmsnorm_rope and qkv_heads (src/ops/rmsnorm/rmsnorm.h; Backend::qkv_heads). rmsnorm: rows,
// dim, weighted (0: no scale), and heads (> 0: x is [rows, heads, dim], the per-head norms of q and k).
// rmsnorm_rope: rows, heads, dim, rotated (the pairs with a nonzero frequency: full layers rotate 64 of their 256),
// pos0. qkv_heads: the parameters of run_qkv_heads (tests/ops/conformance/runners_rows.cpp).
#include "ops/op_cases.h"

namespace dg {
namespace {

constexpr const char* kNormBasis =
    "a different f32 order of the sums of squares flips a bf16 rounding of a stored value by one ulp at most; a flip "
    "early in a chain moves the outputs by a few ulps of the row's scale";

constexpr Bound kCudaHeadNorm{
    .of_peak = 0x1p-5,
    .min_cosine = 0.9999,
    .basis = kNormBasis,
    .measured = "FusedNormsCuda (H200, 2026-12-01): per-head rmsnorm max_abs 7.8e-3 and rmsnorm_rope 1.6e-2 at D 256 "
                "over 4096 head rows (values up to ~8), cosine 1.000000000; odd shapes bit-identical"};

constexpr Bound kCudaRowNorm{
    .of_peak = 0x1p-5,
    .min_cosine = 0.9999,
    .basis = kNormBasis,
    .measured = "FusedNormsCuda (H200, 2026-12-01): residual_norms at 256 x 2816, whose outputs are rmsnorm_cuda's "
                "rows (the fused kernel sums the squares in its order), max_abs 7.8e-3, h1 3.9e-3, cosine "
                "1.000000000; 3 x 7 and 65 x 1000 bit-identical"};

OpCase norm(std::string name, CaseParams p, const Bound& cuda) {
  return {"rmsnorm", "rmsnorm", std::move(name), std::move(p), DType::kBF16, false, false, {{"cuda", "", cuda}}};
}

constexpr Bound kCudaQkvHeads{
    .of_peak = 0x1p-5,
    .min_cosine = 0.9999,
    .basis = "the products differ from the CPU's by their summation order (a bf16 ulp of a raw q/k/v value at most, "
             "as linears measures), then the norms' sums of squares as rmsnorm's, and the rotation as rope's",
    .measured = "Backends/OpConformance (H200, 2026-12-03, commit c739406): bit for bit in the five small cases; "
                "26B-A4B sliding canvas and four full-layer canvases max_abs 3.1e-2 (bf16 ulps of values to ~8), "
                "cosine >= 0.99999998, worst/bound 0.203; heads_norm by head rows (45e78ff: its sums of squares in "
                "another order) passed every case on the H200, 2026-12-05, its ratios not recorded"};

OpCase qkv(std::string name, CaseParams p, bool real = false) {
  return {"rmsnorm", "qkv_heads", std::move(name), std::move(p), DType::kBF16, real, false,
          {{"cuda", "", kCudaQkvHeads}}};
}

// fp8 q/k/v weights with fp8 activations (W8A8), through the row-scaled pass (on_load 0) or with the scales applied
// by the per-head norms (on_load 1, CudaKernels::a8_scales_on_load).
constexpr Bound kCudaQkvA8{
    .of_peak = 0x1p-5,
    .min_cosine = 0.9999,
    .basis = "the same E4M3 inputs on both sides; each product rounded to bf16 once (the GPU's raw sum before the "
             "scales with on_load, after them otherwise; the twin after them: each within 2^-8 relative, so up to "
             "2^-7 between them) with the tensor cores' partial sums (2^-12 of the sum of |products|), then the "
             "norms and the rotation as qkv_heads'",
    .measured = "Backends/OpConformance (H200, 2026-12-05, commit 03635ef): through the row-scaled pass worst/bound "
                "0.25 (26B-A4B sliding canvas, k: max_abs 4.7e-2), cosine >= 0.9999993; scales on load 0.328 (the "
                "same case: max_abs 6.3e-2), cosine >= 0.9999936 (the GPU's rounding of a raw sum no longer falls "
                "where the twin's rounding of the scaled sum does)"};

OpCase qkv_a8(std::string name, CaseParams p, bool real = false) {
  return {"rmsnorm", "qkv_heads", "fp8 W8A8 " + std::move(name), std::move(p), DType::kFp8, real, false,
          {{"cuda", "", kCudaQkvA8}}};
}

OpCase norm_rope(std::string name, CaseParams p) {
  return {"rmsnorm", "rmsnorm_rope", std::move(name), std::move(p), DType::kBF16, false, false,
          {{"cuda", "", kCudaHeadNorm}}};
}

}  // namespace

std::vector<OpCase> rmsnorm_cases() {
  return {
      norm("1 x 7", {{"rows", 1}, {"dim", 7}, {"weighted", 1}}, kCudaRowNorm),
      norm("7 x 1, no scale", {{"rows", 7}, {"dim", 1}, {"weighted", 0}}, kCudaRowNorm),
      norm("3 x 111", {{"rows", 3}, {"dim", 111}, {"weighted", 1}}, kCudaRowNorm),
      norm("5 x 989, no scale", {{"rows", 5}, {"dim", 989}, {"weighted", 0}}, kCudaRowNorm),
      norm("tiny_a hidden 20 x 64", {{"rows", 20}, {"dim", 64}, {"weighted", 1}}, kCudaRowNorm),
      norm("26B-A4B hidden 256 x 2816", {{"rows", 256}, {"dim", 2816}, {"weighted", 1}}, kCudaRowNorm),
      // The CUDA vector kernel's rows (bf16, a multiple of 8 up to 4,096): the router's unscaled norm, its widest
      // row, and the first row past it (the scalar kernel again).
      norm("26B-A4B router 256 x 2816, no scale", {{"rows", 256}, {"dim", 2816}, {"weighted", 0}}, kCudaRowNorm),
      norm("widest vector row 3 x 4096", {{"rows", 3}, {"dim", 4096}, {"weighted", 1}}, kCudaRowNorm),
      norm("past the vector rows 2 x 4104", {{"rows", 2}, {"dim", 4104}, {"weighted", 1}}, kCudaRowNorm),
      norm("tiny_b k heads 8 x 2 x 8", {{"rows", 8}, {"heads", 2}, {"dim", 8}, {"weighted", 1}}, kCudaHeadNorm),
      norm("smallest warp head 5 x 3 x 16", {{"rows", 5}, {"heads", 3}, {"dim", 16}, {"weighted", 1}}, kCudaHeadNorm),
      norm("26B-A4B sliding q 256 x 16 x 256", {{"rows", 256}, {"heads", 16}, {"dim", 256}, {"weighted", 1}},
           kCudaHeadNorm),
      norm("26B-A4B full k 256 x 2 x 512", {{"rows", 256}, {"heads", 2}, {"dim", 512}, {"weighted", 1}},
           kCudaHeadNorm),
      norm("26B-A4B full v 256 x 2 x 512, no scale", {{"rows", 256}, {"heads", 2}, {"dim", 512}, {"weighted", 0}},
           kCudaHeadNorm),
      norm("widest warp row 7 x 1 x 1024", {{"rows", 7}, {"heads", 1}, {"dim", 1024}, {"weighted", 1}},
           kCudaHeadNorm),
      norm_rope("26B-A4B sliding q, every pair rotated", {{"rows", 256}, {"heads", 16}, {"dim", 256},
                                                          {"rotated", 128}, {"pos0", 1024}}),
      norm_rope("26B-A4B full k, 64 of 256 pairs", {{"rows", 256}, {"heads", 2}, {"dim", 512}, {"rotated", 64},
                                                   {"pos0", 8191}}),
      norm_rope("smallest head dim", {{"rows", 5}, {"heads", 3}, {"dim", 16}, {"rotated", 8}, {"pos0", 0}}),
      norm_rope("widest warp row", {{"rows", 7}, {"heads", 1}, {"dim", 1024}, {"rotated", 512}, {"pos0", 3}}),
      norm_rope("tiny_a full, 4 of 16 pairs", {{"rows", 20}, {"heads", 1}, {"dim", 32}, {"rotated", 4},
                                               {"pos0", 21}}),
      qkv("tiny_a sliding, one sequence", {{"rows", 20}, {"in", 64}, {"heads", 4}, {"kv", 2}, {"dim", 16},
                                           {"rotated", 8}, {"v", 1}, {"spans", 1}, {"apart", 0}}),
      qkv("full layer (V from the raw K), 3 sequences", {{"rows", 29}, {"in", 64}, {"heads", 4}, {"kv", 1},
                                                         {"dim", 32}, {"rotated", 4}, {"v", 0}, {"spans", 3},
                                                         {"apart", 0}}),
      qkv("k and v only", {{"rows", 9}, {"in", 48}, {"heads", 0}, {"kv", 2}, {"dim", 16}, {"rotated", 8}, {"v", 1},
                           {"spans", 2}, {"apart", 0}}),
      qkv("weights apart", {{"rows", 12}, {"in", 40}, {"heads", 2}, {"kv", 1}, {"dim", 48}, {"rotated", 24},
                            {"v", 1}, {"spans", 1}, {"apart", 1}}),
      qkv("1,100 rows in 70 sequences", {{"rows", 1100}, {"in", 32}, {"heads", 2}, {"kv", 1}, {"dim", 16},
                                         {"rotated", 8}, {"v", 1}, {"spans", 70}, {"apart", 0}}),
      qkv("head dim 1024, two head rows a warp, 2 sequences", {{"rows", 12}, {"in", 64}, {"heads", 2}, {"kv", 1},
                                                               {"dim", 1024}, {"rotated", 512}, {"v", 1},
                                                               {"spans", 2}, {"apart", 0}}),
      qkv("26B-A4B sliding, one canvas", {{"rows", 256}, {"in", 2816}, {"heads", 16}, {"kv", 8}, {"dim", 256},
                                          {"rotated", 128}, {"v", 1}, {"spans", 1}, {"apart", 0}}, true),
      qkv("26B-A4B full, four canvases", {{"rows", 1024}, {"in", 2816}, {"heads", 16}, {"kv", 2}, {"dim", 512},
                                          {"rotated", 64}, {"v", 0}, {"spans", 4}, {"apart", 0}}, true),
      qkv_a8("tiny_a sliding", {{"rows", 20}, {"in", 64}, {"heads", 4}, {"kv", 2}, {"dim", 16}, {"rotated", 8},
                                {"v", 1}, {"spans", 1}, {"apart", 0}, {"act8", 1}, {"on_load", 0}}),
      qkv_a8("tiny_a sliding, scales on load", {{"rows", 20}, {"in", 64}, {"heads", 4}, {"kv", 2}, {"dim", 16},
                                                {"rotated", 8}, {"v", 1}, {"spans", 1}, {"apart", 0}, {"act8", 1},
                                                {"on_load", 1}}),
      qkv_a8("full layer (V from the raw K), 3 sequences, scales on load",
             {{"rows", 29}, {"in", 64}, {"heads", 4}, {"kv", 1}, {"dim", 32}, {"rotated", 4}, {"v", 0}, {"spans", 3},
              {"apart", 0}, {"act8", 1}, {"on_load", 1}}),
      qkv_a8("k and v only, scales on load", {{"rows", 9}, {"in", 48}, {"heads", 0}, {"kv", 2}, {"dim", 16},
                                              {"rotated", 8}, {"v", 1}, {"spans", 2}, {"apart", 0}, {"act8", 1},
                                              {"on_load", 1}}),
      qkv_a8("26B-A4B sliding, one canvas", {{"rows", 256}, {"in", 2816}, {"heads", 16}, {"kv", 8}, {"dim", 256},
                                             {"rotated", 128}, {"v", 1}, {"spans", 1}, {"apart", 0}, {"act8", 1},
                                             {"on_load", 0}}, true),
      qkv_a8("26B-A4B sliding, one canvas, scales on load",
             {{"rows", 256}, {"in", 2816}, {"heads", 16}, {"kv", 8}, {"dim", 256}, {"rotated", 128}, {"v", 1},
              {"spans", 1}, {"apart", 0}, {"act8", 1}, {"on_load", 1}}, true),
      qkv_a8("26B-A4B full, four canvases, scales on load",
             {{"rows", 1024}, {"in", 2816}, {"heads", 16}, {"kv", 2}, {"dim", 512}, {"rotated", 64}, {"v", 0},
              {"spans", 4}, {"apart", 0}, {"act8", 1}, {"on_load", 1}}, true),
  };
}

}  // namespace dg
