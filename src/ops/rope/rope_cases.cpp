// Cases of rope (src/ops/rope/rope.h): x [rows, heads, dim] rotated at positions pos0 + row, with frequencies
// theta^(-2i / dim) for the first `rotated` pairs and zero above (full layers' proportional RoPE).
#include "ops/op_cases.h"

namespace dg {
namespace {

constexpr Bound kCudaRope{
    .of_peak = 0x1p-6,
    .min_cosine = 0.9999,
    .basis = "angles are the same f32 products; cos and sin from the GPU's sincosf against libm's differ by an f32 "
             "ulp or two, which flips their bf16 rounding where they straddle a boundary; each product and the sum "
             "are rounded to bf16: a few bf16 ulps of the pair's magnitude",
    .measured = "Backends/OpConformance (H200, 2026-12-02, commit 59de0e2): bit for bit in all 8 cases (positions to 8,191, head dims to 512)"};

// rope_spans: the same arithmetic as rope, one launch for several spans.
constexpr Bound kCudaRopeSpans{
    .of_peak = 0x1p-6,
    .min_cosine = 0.9999,
    .basis = "rope's arithmetic per span (the same f32 angles and bf16 roundings as rope_kernel); positions reach "
             "31,262 here, where sincosf and libm differ by an ulp more often than below 8,192",
    .measured = "Backends/OpConformance (H200, 2026-12-03, commit 2ddad82): bit for bit in the three small cases; "
                "32 canvases (positions to 31,262): max |d| 1.56e-2 (one bf16 ulp at 2-4), cosine 1.000000, "
                "worst/bound 0.354"};

OpCase rope(std::string name, CaseParams p) {
  return {"rope", "rope", std::move(name), std::move(p), DType::kBF16, false, false, {{"cuda", "", kCudaRope}}};
}

OpCase spans(std::string name, CaseParams p, bool real = false) {
  return {"rope", "rope_spans", std::move(name), std::move(p), DType::kBF16, real, false,
          {{"cuda", "", kCudaRopeSpans}}};
}

}  // namespace

std::vector<OpCase> rope_cases() {
  return {
      rope("one row, one pair", {{"rows", 1}, {"heads", 1}, {"dim", 2}, {"rotated", 1}, {"pos0", 0}}),
      rope("odd 7 x 3 x 6", {{"rows", 7}, {"heads", 3}, {"dim", 6}, {"rotated", 3}, {"pos0", 989}}),
      rope("111 rows", {{"rows", 111}, {"heads", 2}, {"dim", 32}, {"rotated", 16}, {"pos0", 0}}),
      rope("tiny_a sliding k", {{"rows", 20}, {"heads", 2}, {"dim", 16}, {"rotated", 8}, {"pos0", 0}}),
      rope("tiny_a full, 4 of 16 pairs", {{"rows", 20}, {"heads", 1}, {"dim", 32}, {"rotated", 4}, {"pos0", 7}}),
      rope("tiny_b sliding q", {{"rows", 8}, {"heads", 4}, {"dim", 8}, {"rotated", 4}, {"pos0", 5}}),
      rope("26B-A4B sliding q", {{"rows", 256}, {"heads", 16}, {"dim", 256}, {"rotated", 128}, {"pos0", 1024}}),
      rope("26B-A4B full k, 64 of 256 pairs", {{"rows", 256}, {"heads", 2}, {"dim", 512}, {"rotated", 64},
                                              {"pos0", 8191}}),
      spans("3 sequences, odd", {{"rows", 29}, {"heads", 3}, {"dim", 6}, {"rotated", 3}, {"spans", 3}, {"gap", 0}}),
      spans("rows of no span", {{"rows", 40}, {"heads", 2}, {"dim", 16}, {"rotated", 8}, {"spans", 4}, {"gap", 1}}),
      spans("70 spans, two launches", {{"rows", 140}, {"heads", 2}, {"dim", 8}, {"rotated", 4}, {"spans", 70},
                                      {"gap", 0}}),
      spans("26B-A4B 32 canvases, sliding q", {{"rows", 8192}, {"heads", 16}, {"dim", 256}, {"rotated", 128},
                                              {"spans", 32}, {"gap", 0}}, true),
  };
}

}  // namespace dg
