// q4 in the kernel layout (Q4Layout::kKernel, made on the device at upload by q4_to_kernel_layout_cuda): the
// streaming kernel's weight format with two instructions per bf16 pair of an mma A fragment (a mask and a bf16x2
// fma) instead of the disk layout's five or six (WeightQ4). Layout and arithmetic: docs/CUDA.md ("q4 in the kernel
// layout"); the layout's definition and its host twin: src/ops/moe/q4_layout.h.
#pragma once

#include "ops/moe/moe_stream_formats.cuh"

namespace dg::moe_stream {

// A group's 16 code bytes are four 32-bit words, word t holding lane t's eight codes of the group: the elements
// 2t, 2t + 1 (bits 0-3, 16-19), 2t + 8, 2t + 9 (bits 4-7, 20-23), 2t + 16, 2t + 17 (bits 8-11, 24-27) and 2t + 24,
// 2t + 25 (bits 12-15, 28-31). A nibble masked in place at bits 0-3 of a bf16 half is a subnormal bf16 of value
// q 2^-133, at bits 4-7 of value q 2^-129 (bit 7 is the exponent's low bit: codes 8-15 read as normal numbers and
// gradual underflow keeps the value linear). The scale word is bf16 (scale 2^(133 - p), min 2^-p), p the matrix's
// power of two (plane 2, an f32 2^p the epilogue multiplies by), so fma(v, scale 2^(133 - p), min 2^-p) =
// 2^-p bf16(scale q + min): one rounding of exact operands, the disk layout's weights times 2^-p.
// kStages_: the pipeline's depth (2, 3 or 4; four CTAs per SM fit up to 3, three at 4).
template <int kStages_>
struct WeightQ4Kernel : PackedStage<128, 32, 4> {
  static constexpr int kStages = kStages_;
  static constexpr int kMinBlocks = 4;
  static constexpr int kKAlign = 32;
  static constexpr int kLoadK = 128, kFrags = 8;  // one load_a: the whole stage (the four scale words in one load)
  using Loader = PackedLoader<WeightQ4::Scales>;
  __device__ static uint32_t fma2(uint32_t v, uint32_t s, uint32_t m) {
    return as_u32(__hfma2(as_bf162(v), as_bf162(s), as_bf162(m)));
  }
  // a[f]: the k16 fragment f of the stage (group f / 2, half f % 2).
  __device__ static void load_a(uint32_t src, const StageSrc&, int row0, int, int lane, uint32_t (&a)[8][4]) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = row0 + g + 8 * h;
      const uint4 sc = lds128(scale_addr(src, r, 0));
      const uint32_t sw[4] = {sc.x, sc.y, sc.z, sc.w};
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const uint32_t w = lds32(code_addr(src, c, r) + 4 * t);
        const uint32_t sa = __byte_perm(sw[c], 0, 0x1010), m = __byte_perm(sw[c], 0, 0x3232);  // (s, s), (m, m)
        // scale 2^(129 - p) for the codes at bits 4-7: exact, a power-of-two multiple of an exact value.
        const uint32_t sb = as_u32(__hmul2(as_bf162(sa), bf162_bits(0x3D80)));  // 2^-4
        const uint32_t w8 = w >> 8;
        a[2 * c][h] = fma2(w & 0x000F000Fu, sa, m);
        a[2 * c][2 + h] = fma2(w & 0x00F000F0u, sb, m);
        a[2 * c + 1][h] = fma2(w8 & 0x000F000Fu, sa, m);
        a[2 * c + 1][2 + h] = fma2(w8 & 0x00F000F0u, sb, m);
      }
    }
  }
  // 2^p of the matrix (plane 2).
  __device__ static float row_scale(const Planes& w, int64_t mat, int64_t) {
    return *reinterpret_cast<const float*>(w.p[2] + mat * 4);
  }
};

}  // namespace dg::moe_stream
