// Cases of embed (src/ops/embed/embed.h): rows ids drawn from [0, vocab) into a [vocab, hidden] table.
#include "ops/op_cases.h"

namespace dg {
namespace {

constexpr Bound kCudaEmbed{
    .exact = true,
    .basis = "both sides multiply the same bf16 table value by the same bf16(sqrt(hidden)) in f32 and round once",
    .measured = "CudaFullShape 2-layer slice (H200, 2026-11-30): the decoder input (embed, then rmsnorm without "
                "scale) identical to the CPU's; the step-2 decoder input on tiny_a max |diff| 0"};

OpCase embed(std::string name, int64_t rows, int64_t vocab, int64_t hidden) {
  return {"embed", "embed", std::move(name), {{"rows", rows}, {"vocab", vocab}, {"hidden", hidden}}, DType::kBF16,
          false, false, {{"cuda", "", kCudaEmbed}}};
}

}  // namespace

std::vector<OpCase> embed_cases() {
  return {embed("one id", 1, 7, 16),           embed("odd 7 x 111", 7, 989, 111),
          embed("tiny_a prompt", 20, 512, 64), embed("tiny_b, bf16(sqrt 32) != sqrt 32", 8, 640, 32),
          embed("26B-A4B canvas", 256, 1024, 2816)};
}

}  // namespace dg
