// The self-conditioning state (a step's tempered logits, [canvas, vocab] per stream) on the CPU backend: under a
// bf16 or f16 activation precision it is stored in 16 bits, half the bytes, and holds exactly the values the f32
// storage held (row_stats rounds them to the activation storage), so the next step's soft embedding is unchanged
// bit for bit, exact and sparse; under f32 it stays f32.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <vector>

#include "backend/registry.h"
#include "diffusion/rng.h"

namespace dg {
namespace tempered_storage_test {

std::vector<uint32_t> f32_bits(const Tensor& t) {
  std::vector<uint32_t> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = std::bit_cast<uint32_t>(load_f32(t.data, t.dtype, i));
  return out;
}

TEST(TemperedLogits, SixteenBitStorageHoldsTheRoundedValuesExactly) {
  const int64_t rows = 7, V = 989, H = 48;
  for (const Storage act : {Storage::kBF16, Storage::kF16}) {
    SCOPED_TRACE(std::string(storage_name(act)));
    const auto be = make_backend("cpu", BackendOptions{Precision{act, act}});
    // Softcapped logits in (-30, 30), one large (f16 spacing 32 after the temperature) and one tiny.
    Tensor logits = be->alloc_f32(Shape{rows, V});
    Lcg rng(7);
    for (int64_t i = 0; i < logits.numel(); ++i) logits.f32()[i] = static_cast<float>(rng.uniform() * 60.0 - 30.0);
    logits.f32()[5] = 3.0e4f;
    logits.f32()[V + 3] = -1.0e-30f;
    Tensor embed = host_tensor(DType::kBF16, Shape{V, H});
    for (int64_t i = 0; i < embed.numel(); ++i)
      static_cast<uint16_t*>(embed.data)[i] = f32_to_bf16(static_cast<float>(rng.uniform() - 0.5));

    Tensor t16 = be->alloc_tempered(Shape{rows, V});
    EXPECT_EQ(t16.dtype, act == Storage::kBF16 ? DType::kBF16 : DType::kF16);
    EXPECT_EQ(t16.nbytes(), static_cast<size_t>(rows * V * 2));
    Tensor t32 = be->alloc(Shape{rows, V});  // f32 values rounded to the activation storage
    std::vector<RowStats> s16(rows), s32(rows);
    be->row_stats(logits, 0.7f, t16, s16.data());
    be->row_stats(logits, 0.7f, t32, s32.data());
    EXPECT_EQ(f32_bits(t16), f32_bits(t32));
    for (size_t r = 0; r < s16.size(); ++r) {
      EXPECT_EQ(s16[r].argmax, s32[r].argmax);
      EXPECT_EQ(std::bit_cast<uint32_t>(s16[r].entropy), std::bit_cast<uint32_t>(s32[r].entropy));
    }
    for (const float cutoff : {0.0f, static_cast<float>(std::exp(-10.0))}) {
      Tensor o16 = be->alloc(Shape{rows, H}), o32 = be->alloc(Shape{rows, H});
      be->soft_embed(t16, embed, cutoff, o16, nullptr);
      be->soft_embed(t32, embed, cutoff, o32, nullptr);
      EXPECT_EQ(f32_bits(o16), f32_bits(o32)) << "sparse cutoff " << cutoff;
    }
  }
  const auto f32 = make_backend("cpu");
  EXPECT_EQ(f32->alloc_tempered(Shape{2, 3}).dtype, DType::kF32) << "f32 values are not rounded: no 16-bit copy";
  EXPECT_EQ(backend_entry("cpu").bytes(Precision{Storage::kBF16, Storage::kBF16}).tempered, 2);
  EXPECT_EQ(backend_entry("cpu").bytes(Precision{}).tempered, 4);
}

}  // namespace tempered_storage_test
}  // namespace dg
