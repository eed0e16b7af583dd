// Cases of the products (src/ops/linear/linear.h and the Backend's fused forms): linear (rows, in, out; weights in
// any format), linears (rows, in, out0..out2: outputs of the weights that share the input, 0 for a skipped one;
// the q/k/v projections), gated_linear (rows, in, ff: gelu(x gate^T) * (x up^T)). The fused forms' twin is the
// composition of the unfused CPU ops. act8 = 1: both backends run fp8 linears with fp8 activations (W8A8,
// BackendOptions::linear_act8; the twin quantises the input per row as the GPU does, then its f32 dot products).
#include "ops/op_cases.h"

namespace dg {
namespace {

constexpr const char* kGemmBasis =
    "a GEMM with f32 accumulation against the twin's f32 dot products: each side rounds its result to bf16 once "
    "(each within 2^-8 relative, so up to 2^-7 between them), and the accumulation orders differ by at most 2^-14 "
    "of the sum of |products|";

// The streaming kernel's dense form on packed weights, measured against f64; the twin's own bf16 rounding adds
// 2^-9 |want| (rel 2^-7 covers both).
constexpr const char* kPackedMeasured =
    "MoeStreamQuantCuda.DenseLinear (H200, 2026-11-30, tree ff948ab): every element within 2^-8 |exact| + 2^-14 S "
    "(+ 2^-9 S for q4) of f64 sums, cosine >= 0.99999, at 130 x 64 -> 200 (q4, fp8, nvfp4, q8) and the q8 "
    "self-conditioning MLP 256 x 2816 -> 2112 and 256 x 2112 -> 2816";

constexpr Bound kCudaDense{
    .rel = 0x1p-7, .rel_sum = 0x1p-14, .min_cosine = 0.99999, .basis = kGemmBasis,
    .measured = "Backends/OpConformance (H200, 2026-12-02, commit 59de0e2): linear worst 0.85 of the bound (26B-A4B full o_proj: max_abs 0.125, cosine "
                "0.999997), linears 0.86 (26B-A4B sliding q, k, v: max_abs 6.3e-2), cosine >= 0.999997 in all 25 "
                "cases"};
constexpr Bound kCudaPacked{.rel = 0x1p-7, .rel_sum = 0x1p-14, .min_cosine = 0.99999, .basis = kGemmBasis,
                            .measured = kPackedMeasured};
constexpr Bound kCudaPackedQ4{
    .rel = 0x1p-7, .rel_sum = 0x1p-14 + 0x1p-9, .min_cosine = 0.99999,
    .basis = "the GEMM bound plus q4's decoded weight rounded once to bf16 (2^-9 relative per weight)",
    .measured = kPackedMeasured};
// W8A8 (cuBLASLt's e4m3 product, both scales on its f32 sums): the same E4M3 inputs on both sides; Hopper's fp8
// tensor cores sum a few k32 steps in about 14 bits before cuBLASLt adds them into f32 (docs/CUDA.md), so the order
// term is wider than bf16's.
constexpr const char* kA8Basis =
    "the same E4M3 activations and weights on both sides (the GPU's per-row quantisation is the twin's); the output "
    "rounded to bf16 once on each side (each within 2^-8 relative, so up to 2^-7 between them), the e4m3 tensor "
    "cores' partial sums kept to about 14 bits before cuBLASLt promotes them to f32 (2^-12 of the sum of |products|)";
constexpr const char* kA8Measured =
    "Backends/OpConformance (H200, 2026-12-03, commit 16aee27): linear worst 0.90 of the bound (130 x 64 -> 208: "
    "max_abs 7.8e-3), the 26B-A4B shapes 0.56-0.71 (o_proj, a 4,096-row prefill chunk's dense down), linears "
    "0.65-0.82, cosine >= 0.9999998; gated_linear 0.088 of its bound (26B-A4B dense MLP: max_abs 1.0 of outputs near "
    "2^7, cosine 0.9999995)";
constexpr Bound kCudaA8{
    .rel = 0x1p-7, .rel_sum = 0x1p-12, .min_cosine = 0.9999, .basis = kA8Basis, .measured = kA8Measured};
constexpr Bound kCudaGatedA8{.of_peak = 0x1p-5, .min_cosine = 0.9995, .basis = kA8Basis, .measured = kA8Measured};
// The scales applied by the gated GELU as it reads the raw sums (CudaKernels::a8_scales_on_load): each product still
// rounded to bf16 once, before its scales rather than after them, the same size of rounding.
constexpr Bound kCudaGatedA8OnLoad{
    .of_peak = 0x1p-5, .min_cosine = 0.9995,
    .basis = "as the W8A8 gated_linear's: the same E4M3 inputs, each product rounded to bf16 once on each side (here "
             "its raw sum, before the two scales; the twin after them: each within 2^-8 relative, so up to 2^-7 "
             "between them), the tensor cores' partial sums (2^-12 of the sum of |products|), then gelu and the "
             "product rounded as stored",
    .measured = "Backends/OpConformance (H200, 2026-12-05, commit 03635ef): worst/bound 0.292 (32 canvases of the "
                "dense MLP: max_abs 4.0), 0.188 at one canvas (max_abs 2.0; the pass: 1.0), 0.165 and 0.222 on the "
                "small shapes, cosine >= 0.9999884"};
constexpr Bound kCudaNoQ6{.refused = "the CUDA backend has no q6 kernel: refused at upload (docs/FORMATS.md)"};
constexpr Bound kCudaGated{
    .of_peak = 0x1p-6, .min_cosine = 0.9999,
    .basis = "the gate and up products within the GEMM bound, then gelu and the product each rounded to bf16: an "
             "f32 order difference flips a rounding by one ulp at most, a few bf16 ulps of the largest output",
    .measured = "Backends/OpConformance (H200, 2026-12-02, commit 59de0e2): worst 0.19 of the bound (26B-A4B dense MLP: max_abs 1.0 of outputs near 2^7), "
                "cosine >= 0.99999998 in all 4 cases"};

OpCase linear(std::string name, CaseParams p, DType w, const Bound& cuda, bool real = false) {
  return {"linear", "linear", std::move(name), std::move(p), w, real, false, {{"cuda", "", cuda}}};
}

OpCase packed(int64_t rows, int64_t in, int64_t out, DType w, bool real = false) {
  const Bound& cuda = w == DType::kQ6 ? kCudaNoQ6 : w == DType::kQ4 ? kCudaPackedQ4 : kCudaPacked;
  return linear(std::string(dtype_name(w)) + " " + std::to_string(rows) + " x " + std::to_string(in) + " -> " +
                    std::to_string(out),
                {{"rows", rows}, {"in", in}, {"out", out}}, w, cuda, real);
}

OpCase linears(std::string name, CaseParams p, bool real = false) {
  return {"linear", "linears", std::move(name), std::move(p), DType::kBF16, real, false, {{"cuda", "", kCudaDense}}};
}

// fp8 weights with fp8 activations (act8; on_load: the scales applied by the reading kernel).
OpCase a8(const char* op, std::string name, CaseParams p, bool real = false) {
  const std::string o = op;
  const bool on_load = p.has("on_load") && p.n("on_load") != 0;
  const Bound& cuda = o != "gated_linear" ? kCudaA8 : on_load ? kCudaGatedA8OnLoad : kCudaGatedA8;
  return {"linear", o, "fp8 W8A8 " + std::move(name), std::move(p), DType::kFp8, real, false, {{"cuda", "", cuda}}};
}

OpCase gated(std::string name, CaseParams p, DType w = DType::kBF16, bool real = false) {
  return {"linear", "gated_linear", std::move(name), std::move(p), w, real, false, {{"cuda", "", kCudaGated}}};
}

}  // namespace

std::vector<OpCase> linear_cases() {
  return {
      linear("1 x 7 -> 5", {{"rows", 1}, {"in", 7}, {"out", 5}}, DType::kBF16, kCudaDense),
      linear("7 x 111 -> 989", {{"rows", 7}, {"in", 111}, {"out", 989}}, DType::kBF16, kCudaDense),
      linear("tiny_a q_proj", {{"rows", 20}, {"in", 64}, {"out", 64}}, DType::kBF16, kCudaDense),
      linear("26B-A4B sliding q_proj", {{"rows", 256}, {"in", 2816}, {"out", 4096}}, DType::kBF16, kCudaDense, true),
      linear("26B-A4B full o_proj", {{"rows", 256}, {"in", 8192}, {"out", 2816}}, DType::kBF16, kCudaDense, true),
      linear("26B-A4B dense down", {{"rows", 256}, {"in", 2112}, {"out", 2816}}, DType::kBF16, kCudaDense, true),
      packed(130, 64, 200, DType::kQ4),
      packed(130, 64, 200, DType::kQ6),
      packed(130, 64, 200, DType::kQ8),
      packed(130, 64, 200, DType::kFp8),
      packed(130, 64, 200, DType::kNvFp4),
      packed(256, 2816, 2112, DType::kQ8, true),  // the self-conditioning MLP of a pack
      packed(256, 2112, 2816, DType::kQ8, true),
      linears("q, k, v", {{"rows", 77}, {"in", 256}, {"out0", 512}, {"out1", 128}, {"out2", 128}}),
      linears("k and v only (the encoder's last layer)", {{"rows", 77}, {"in", 256}, {"out0", 0}, {"out1", 128},
                                                          {"out2", 128}}),
      linears("q and k (a full layer: V is the raw K)", {{"rows", 7}, {"in", 111}, {"out0", 13}, {"out1", 5},
                                                         {"out2", 0}}),
      linears("26B-A4B sliding q, k, v", {{"rows", 256}, {"in", 2816}, {"out0", 4096}, {"out1", 2048},
                                          {"out2", 2048}}, true),
      gated("77 x 256 -> 384", {{"rows", 77}, {"in", 256}, {"ff", 384}}),
      gated("odd 7 x 111 -> 13", {{"rows", 7}, {"in", 111}, {"ff", 13}}),
      gated("26B-A4B dense MLP", {{"rows", 256}, {"in", 2816}, {"ff", 2112}}, DType::kBF16, true),
      gated("q8 self-conditioning MLP", {{"rows", 64}, {"in", 128}, {"ff", 96}}, DType::kQ8),
      a8("linear", "130 x 64 -> 208", {{"rows", 130}, {"in", 64}, {"out", 208}, {"act8", 1}}),
      a8("linear", "3 x 32 -> 16", {{"rows", 3}, {"in", 32}, {"out", 16}, {"act8", 1}}),
      a8("linear", "26B-A4B full o_proj", {{"rows", 256}, {"in", 8192}, {"out", 2816}, {"act8", 1}}, true),
      a8("linear", "26B-A4B prefill chunk dense down", {{"rows", 4096}, {"in", 2112}, {"out", 2816}, {"act8", 1}},
         true),
      a8("linears", "q, k, v", {{"rows", 77}, {"in", 256}, {"out0", 512}, {"out1", 128}, {"out2", 128}, {"act8", 1}}),
      a8("linears", "26B-A4B sliding q, k, v", {{"rows", 256}, {"in", 2816}, {"out0", 4096}, {"out1", 2048},
                                                {"out2", 2048}, {"act8", 1}}, true),
      a8("gated_linear", "77 x 256 -> 384", {{"rows", 77}, {"in", 256}, {"ff", 384}, {"act8", 1}}),
      a8("gated_linear", "26B-A4B dense MLP", {{"rows", 256}, {"in", 2816}, {"ff", 2112}, {"act8", 1}}, true),
      a8("gated_linear", "77 x 256 -> 384, scales on load", {{"rows", 77}, {"in", 256}, {"ff", 384}, {"act8", 1},
                                                            {"on_load", 1}}),
      // up's half starts 160 bytes into each row: an output pointer aligned to 32 bytes, not 256
      a8("gated_linear", "7 x 64 -> 80, scales on load", {{"rows", 7}, {"in", 64}, {"ff", 80}, {"act8", 1},
                                                          {"on_load", 1}}),
      a8("gated_linear", "26B-A4B dense MLP, scales on load", {{"rows", 256}, {"in", 2816}, {"ff", 2112},
                                                              {"act8", 1}, {"on_load", 1}}, true),
      a8("gated_linear", "32 canvases of the dense MLP, scales on load", {{"rows", 8192}, {"in", 2816},
                                                                         {"ff", 2112}, {"act8", 1}, {"on_load", 1}},
         true),
  };
}

}  // namespace dg
