// Cases of gelu_mul (src/ops/glu/glu.h): gate and up [rows, cols], out = gelu_tanh(gate) * up.
#include "ops/op_cases.h"

namespace dg {
namespace {

constexpr Bound kCudaGlu{
    .abs = 1e-6,
    .rel = 0x1p-7,
    .min_cosine = 0.9999,
    .basis = "the GPU's tanhf against libm's tanh flips the bf16 rounding of gelu(g) by one ulp at most where it "
             "straddles a boundary, and the product adds its own rounding: two bf16 ulps (2^-7 relative)",
    .measured = "Backends/OpConformance (H200, 2026-12-02, commit 59de0e2): bit for bit in all 5 cases, 26B-A4B's 256 x 2112 and 2048 x 704 included"};

OpCase glu(std::string name, int64_t rows, int64_t cols) {
  return {"glu", "gelu_mul", std::move(name), {{"rows", rows}, {"cols", cols}}, DType::kBF16, false, false,
          {{"cuda", "", kCudaGlu}}};
}

}  // namespace

std::vector<OpCase> glu_cases() {
  return {glu("1 x 7", 1, 7), glu("3 x 989", 3, 989), glu("tiny_a dense 20 x 128", 20, 128),
          glu("26B-A4B dense 256 x 2112", 256, 2112), glu("26B-A4B experts 2048 x 704", 2048, 704)};
}

}  // namespace dg
