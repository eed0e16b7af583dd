// q4 in the kernel layout (Q4Layout::kKernel, made on the device at upload by q4_to_kernel_layout_cuda): the
// streaming kernel's weight format with two instructions per bf16 pair of an mma A fragment (a mask and a bf16x2
// fma) instead of the disk layout's five or six (WeightQ4), and the weights read straight into registers: each
// weight byte feeds one warp only, so it skips shared memory, which the activation rows (read by every warp) keep
// to themselves. Layout and arithmetic: docs/CUDA.md ("q4 in the kernel layout"); the layout's definition and its
// host twin: src/ops/moe/q4_layout.h.
#pragma once

#include "ops/moe/moe_stream_formats.cuh"

namespace dg::moe_stream {

// A group's words: word t holds lane t's eight codes of the group: the elements 2t, 2t + 1 (bits 0-3, 16-19),
// 2t + 8, 2t + 9 (bits 4-7, 20-23), 2t + 16, 2t + 17 (bits 8-11, 24-27) and 2t + 24, 2t + 25 (bits 12-15, 28-31); a
// row's 64 bytes of a stage (four groups) hold lane t's four words at bytes 16t .. 16t + 15. A nibble masked in place
// at bits 0-3 of a bf16 half is a subnormal bf16 of value q 2^-133, at bits 4-7 of value q 2^-129 (bit 7 is the
// exponent's low bit: codes 8-15 read as normal numbers and gradual underflow keeps the value linear). The scale
// word is bf16 (scale 2^(133 - p), min 2^-p), p the matrix's power of two (plane 2, an f32 2^p the epilogue
// multiplies by), so fma(v, scale 2^(133 - p), min 2^-p) = 2^-p bf16(scale q + min): one rounding of exact
// operands, the disk layout's weights times 2^-p.
// kStages_: the activation pipeline's depth (2, 3 or 4); the weights run one stage ahead in registers.
template <int kStages_>
struct WeightQ4Kernel {
  static constexpr bool kAct8 = false, kDirect = true, kPrefetch = false;
  static constexpr int kTileK = 128, kStages = kStages_, kRowCap = 32;
  static constexpr int kMinBlocks = 3;  // 168 registers; at four CTAs (128) the loop spills
  static constexpr int kStageBytes = 0;  // shared memory holds the activations only
  static constexpr int kKAlign = 32;
  static constexpr int kLoadK = 32, kFrags = 2;  // one group: both k16 fragments

  // A lane's weights of one stage: for each of its two m16 tiles (t) and row halves (h: rows g, g + 8), its four
  // code words and the row's four scale words.
  struct Regs {
    uint4 code[2][2], scale[2][2];
  };

  // The lane's four weight rows, resolved once per CTA.
  struct Loader {
    const uint8_t* code[2][2];
    const uint8_t* scale[2][2];
    int groups, scale_align, lane_t;
    uint32_t live;
    __device__ void init(const StageSrc& s) {
      const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
      lane_t = lane & 3;
      groups = s.K / 32;
      const int64_t srb = s.w->row_bytes[1];
      scale_align = srb % 16 == 0 ? 16 : srb % 8 == 0 ? 8 : 4;
      live = 0;
#pragma unroll
      for (int t = 0; t < 2; ++t)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          int64_t wr;
          const bool ok = s.rows.row(16 * warp + (lane >> 2) + 8 * h + t * (kTileN / 2), wr);
          code[t][h] = s.w->p[0] + (ok ? (s.e_row0 + wr) * s.w->row_bytes[0] : 0);
          scale[t][h] = s.w->p[1] + (ok ? (s.e_row0 + wr) * srb : 0);
          live |= ok ? 1u << (2 * t + h) : 0u;
        }
    }
    // The stage at k0 into r: whole stages in one 16-byte load per row and plane; a row's last, shorter stage (n < 4
    // groups: lane t's words at 4 n t) word by word, the rest zero.
    __device__ void fetch(Regs& r, int k0, uint64_t policy) const {
      const int block = k0 / kTileK, n = groups - 4 * block < 4 ? groups - 4 * block : 4;
#pragma unroll
      for (int t = 0; t < 2; ++t)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const bool ok = (live >> (2 * t + h)) & 1u;
          const uint8_t* c = code[t][h] + 64 * block;
          const uint8_t* sc = scale[t][h] + 16 * block;
          if (ok && n == 4) {
            r.code[t][h] = cuda::ldg_stream16(c + 16 * lane_t, policy);
            if (scale_align == 16) {
              r.scale[t][h] = cuda::ldg_stream16(sc, policy);
            } else if (scale_align == 8) {
              const uint2 lo = __ldg(reinterpret_cast<const uint2*>(sc)), hi = __ldg(reinterpret_cast<const uint2*>(sc + 8));
              r.scale[t][h] = make_uint4(lo.x, lo.y, hi.x, hi.y);
            } else {
              const uint32_t* w = reinterpret_cast<const uint32_t*>(sc);
              r.scale[t][h] = make_uint4(__ldg(w), __ldg(w + 1), __ldg(w + 2), __ldg(w + 3));
            }
          } else {
            uint32_t cw[4] = {0, 0, 0, 0}, sw[4] = {0, 0, 0, 0};
            const uint32_t* cp = reinterpret_cast<const uint32_t*>(c + 4 * n * lane_t);
            const uint32_t* sp = reinterpret_cast<const uint32_t*>(sc);
#pragma unroll
            for (int g = 0; g < 4; ++g)
              if (ok && g < n) {
                cw[g] = __ldg(cp + g);
                sw[g] = __ldg(sp + g);
              }
            r.code[t][h] = make_uint4(cw[0], cw[1], cw[2], cw[3]);
            r.scale[t][h] = make_uint4(sw[0], sw[1], sw[2], sw[3]);
          }
        }
    }
  };

  __device__ static uint32_t fma2(uint32_t v, uint32_t s, uint32_t m) {
    return as_u32(__hfma2(as_bf162(v), as_bf162(s), as_bf162(m)));
  }
  __device__ static uint32_t word(const uint4& v, int c) { return c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w; }
  // a[t][f]: tile t's k16 fragment f of group c.
  __device__ static void group_a(const Regs& r, int c, uint32_t (&a)[2][2][4]) {
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t w = word(r.code[t][h], c), sw = word(r.scale[t][h], c);
        const uint32_t sa = __byte_perm(sw, 0, 0x1010), m = __byte_perm(sw, 0, 0x3232);  // (s, s), (m, m)
        // scale 2^(129 - p) for the codes at bits 4-7: exact, a power-of-two multiple of an exact value.
        const uint32_t sb = as_u32(__hmul2(as_bf162(sa), bf162_bits(0x3D80)));  // 2^-4
        const uint32_t w8 = w >> 8;
        a[t][0][h] = fma2(w & 0x000F000Fu, sa, m);
        a[t][0][2 + h] = fma2(w & 0x00F000F0u, sb, m);
        a[t][1][h] = fma2(w8 & 0x000F000Fu, sa, m);
        a[t][1][2 + h] = fma2(w8 & 0x00F000F0u, sb, m);
      }
  }
  // 2^p of the matrix (plane 2).
  __device__ static float row_scale(const Planes& w, int64_t mat, int64_t) {
    return *reinterpret_cast<const float*>(w.p[2] + mat * 4);
  }
};

}  // namespace dg::moe_stream
