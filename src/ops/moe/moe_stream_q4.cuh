// q4 in the kernel layout (WeightLayout::kKernel, made on the device at upload by q4_to_kernel_layout_cuda): the
// streaming kernel's weight format with two instructions per bf16 pair of an mma A fragment (a mask and a bf16x2
// fma) instead of the disk layout's five or six (WeightQ4), and one 16-byte shared load for a lane's codes of a
// whole stage. Layout and arithmetic: docs/CUDA.md ("q4 in the kernel layout"); the layout's definition and its host
// twin: src/ops/moe/q4_layout.h.
#pragma once

#include "ops/moe/moe_stream_formats.cuh"

namespace dg::moe_stream {

// Lane t's code words of a row's stage whose 64 bytes start at shared address `row`: the four of a whole stage in
// one 16-byte load, or the n < 4 of a row's last, shorter stage word by word (the rest zero).
__device__ __forceinline__ uint4 q4k_code_words(uint32_t row, int n, int t) {
  if (n == 4) return lds128(row + static_cast<uint32_t>(16 * t));
  const uint32_t at = row + static_cast<uint32_t>(4 * n * t);
  return make_uint4(lds32(at), n > 1 ? lds32(at + 4) : 0u, n > 2 ? lds32(at + 8) : 0u, 0u);
}

// The bf16 A fragments of row half h (row g + 8 h of the m16 tile) from the row's scale words sc and lane t's code
// words cw of the stage: a[2c + i][h] and a[2c + i][2 + h] for group c, k16 half i.
__device__ __forceinline__ void q4k_fragments(uint4 sc, uint4 cw, int h, uint32_t (&a)[8][4]) {
  auto fma2 = [](uint32_t v, __nv_bfloat162 s, __nv_bfloat162 m) { return as_u32(__hfma2(as_bf162(v), s, m)); };
  const uint32_t sw[4] = {sc.x, sc.y, sc.z, sc.w}, w4[4] = {cw.x, cw.y, cw.z, cw.w};
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const uint32_t w = w4[c];
    // (s, s) and (m, m) as halves of the word, which the products take as operand selections (no byte permutes)
    const __nv_bfloat162 sa = __low2bfloat162(as_bf162(sw[c])), m = __high2bfloat162(as_bf162(sw[c]));
    const __nv_bfloat162 sb = __hmul2(sa, bf162_bits(0x3D80));  // 2^-4
    const uint32_t w8 = w >> 8;
    a[2 * c][h] = fma2(w & 0x000F000Fu, sa, m);
    a[2 * c][2 + h] = fma2(w & 0x00F000F0u, sb, m);
    a[2 * c + 1][h] = fma2(w8 & 0x000F000Fu, sa, m);
    a[2 * c + 1][2 + h] = fma2(w8 & 0x00F000F0u, sb, m);
  }
}

// A group's words: word t holds lane t's eight codes of the group: the elements 2t, 2t + 1 (bits 0-3, 16-19),
// 2t + 8, 2t + 9 (bits 4-7, 20-23), 2t + 16, 2t + 17 (bits 8-11, 24-27) and 2t + 24, 2t + 25 (bits 12-15, 28-31); a
// row's 64 bytes of a stage (four groups) hold lane t's four words at bytes 16t .. 16t + 15. A nibble masked in place
// at bits 0-3 of a bf16 half is a subnormal bf16 of value q 2^-133, at bits 4-7 of value q 2^-129 (bit 7 is the
// exponent's low bit: codes 8-15 read as normal numbers and gradual underflow keeps the value linear). The scale
// word is bf16 (scale 2^(133 - p), min 2^-p), p the matrix's power of two (plane 2, an f32 2^p the epilogue
// multiplies by), so fma(v, scale 2^(133 - p), min 2^-p) = 2^-p bf16(scale q + min): one rounding of exact
// operands, the disk layout's weights times 2^-p.
// A stage holds each weight row's 64 code bytes as stored ([row][64 bytes]: a quarter warp's eight 16-byte loads
// cover 128 contiguous bytes, conflict-free), then the rows' four scale words; a lane reads its four code words and
// the four scale words of each of its rows in one 16-byte load each (a row's last, shorter stage of n < 4 groups word
// by word). kStages_: the pipeline's depth (2, 3 or 4; four CTAs per SM fit up to 3, three at 4).
template <int kStages_>
struct WeightQ4Kernel : PackedStage<128, 32, 4> {
  static constexpr bool kWgmma = true;  // on sm_90a: the fragments below as wgmma's A registers (stage_wgmma)
  static constexpr int kStages = kStages_;
  static constexpr int kMinBlocks = 4;  // 128 registers (32 bytes spilled): 7.44 ms of experts per step, at 3: 7.63
  static constexpr int kKAlign = 32;
  static constexpr int kLoadK = 128, kFrags = 8;  // one load_a: the whole stage
  static constexpr int kRowBytes = 64;
  struct Loader {
    ChunkCopies<kChunks, 32> codes;
    WeightQ4::Scales scales;
    __device__ void init(const StageSrc& s) {
      codes.init(s.w->p[0], s.w->row_bytes[0], s);
      scales.init(s);
    }
    __device__ void load(uint32_t dst, int k0, int K, uint64_t policy) const {
      codes.copy([dst](int r, int c) { return dst + static_cast<uint32_t>(r * kRowBytes + 16 * c); }, k0, K, policy);
      scales.load(dst, k0, K);
    }
  };
  // a[f]: the k16 fragment f of the stage (group f / 2, half f % 2).
  __device__ static void load_a(uint32_t src, const StageSrc& s, int row0, int, int lane, uint32_t (&a)[8][4]) {
    const int g = lane >> 2, t = lane & 3;
    const int left = (s.K - s.k0) / 32, n = left < 4 ? left : 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = row0 + g + 8 * h;
      q4k_fragments(lds128(scale_addr(src, r, 0)), q4k_code_words(src + static_cast<uint32_t>(r * kRowBytes), n, t),
                    h, a);
    }
  }
  __device__ static float row_scale(const Planes& w, int64_t mat, int64_t) {
    return *reinterpret_cast<const float*>(w.p[2] + mat * 4);
  }
};

}  // namespace dg::moe_stream
