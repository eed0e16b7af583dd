// Weight formats of the streaming grouped GEMM (moe_stream.cu): how one pipeline stage of a CTA's [kTileN, kTileK]
// weight tile lands in shared memory, how a warp turns it into mma.sync A fragments (bf16 m16k16, the quantised
// formats dequantised here in registers; or, with kAct8, e4m3 m16k32 straight from the codes), and the f32 factor
// the epilogue applies per weight row. Byte layouts of the
// packed planes: docs/FORMATS.md; the GPU reads them as stored (q4 also in the kernel layout: moe_stream_q4.cuh).
// CPU twins: decode_rows (src/quant/codec.h).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "core/cuda/cuda_common.cuh"
#include "core/cuda/mma.cuh"
#include "ops/moe/moe_cuda.h"

namespace dg::moe_stream {

using cuda::bf16;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTileN = 32 * kWarps;  // weight rows per CTA: each warp owns two m16 tiles, rows 16w and 16w + kTileN/2
constexpr int kMaxRowCap = 128;      // the largest Fmt::kRowCap (routed rows per pass over the weights)

// Byte offset of 16-byte chunk c of row r in a tile of kRowBytes-byte rows: chunks XOR-swizzled by r % 8, so the 8
// row addresses of an ldmatrix fall in distinct banks.
template <int kRowBytes> __device__ __forceinline__ uint32_t swizzle(int r, int c) {
  static_assert(kRowBytes % 128 == 0, "the swizzle permutes groups of 8 chunks");
  return static_cast<uint32_t>(r * kRowBytes + ((c ^ (r & 7)) << 4));
}

// Which weight rows the CTA's kTileN tile rows are: [0, split) -> first + r, [split, kTileN) -> second + r - split.
// A row whose index within its part is >= valid lies outside the tile's columns: never stored (the streaming kernel
// zero-fills it; the ws kernel's TMA boxes read whatever lies there, zeros past W's end).
struct TileRows {
  int64_t first, second;
  int split, valid;
  __device__ bool row(int r, int64_t& w) const {
    const int part = r < split ? r : r - split;
    w = (r < split ? first : second) + part;
    return part < valid;
  }
};

// Staged output rows `out` ([m][kStride] bf16, rows.valid columns) to y's rows r0 .. r0 + m - 1 at column
// rows.first, by kBy threads (t the caller's index among them), 16 bytes at a time where the row and column allow.
template <int kStride, int kBy>
__device__ __forceinline__ void store_staged_rows(const bf16* out, bf16* y_all, int64_t n_out, int r0, int m,
                                                  const TileRows& rows, int t) {
  const int n_cols = rows.valid;
  bf16* y = y_all + static_cast<int64_t>(r0) * n_out + rows.first;
  if (n_cols % 8 == 0 && n_out % 8 == 0 && (reinterpret_cast<uintptr_t>(y_all) & 15) == 0) {
    const int v = n_cols / 8;
    for (int id = t; id < m * v; id += kBy) {
      const int i = id / v, c = id % v;
      *reinterpret_cast<uint4*>(y + i * n_out + 8 * c) = *reinterpret_cast<const uint4*>(out + i * kStride + 8 * c);
    }
  } else {
    for (int id = t; id < m * n_cols; id += kBy) {
      const int i = id / n_cols, c = id % n_cols;
      y[i * n_out + c] = out[i * kStride + c];
    }
  }
}

// The weight stack [n_exp * w_rows, K] as planes (src/core/packed_layout.h): row w of plane i starts at
// p[i] + w * row_bytes[i]; a matrix plane (nvfp4's global scales) holds 4 bytes per expert. limit[i]: bytes that
// may be read from p[i] (the plane's padding included). bf16 weights are plane 0 with row_bytes 2 K. tiled: fp8
// codes or bf16 weights (plane 0) in stage tiles (row_tiles.h) instead of rows.
struct Planes {
  const uint8_t* p[3];
  int64_t row_bytes[3];
  int64_t limit[3];
  bool tiled;
};

// The planes of W [n_exp, w_rows, K] in `fmt` (bf16: one plane of 2 K bytes per row; q4 in the kernel layout: the
// matrices' factors as plane 2; fp8 and bf16 in stage tiles: tiled). Defined in moe_stream.cu.
Planes weight_planes(const void* W, DType fmt, int64_t n_exp, int64_t w_rows, int64_t K, WeightLayout layout);

// Where a stage's weights come from: the expert's first global row, K, the tile's rows and the stage's first k.
struct StageSrc {
  const Planes* w;
  int64_t e_row0;
  int K;
  TileRows rows;
  int k0;
};

// A thread's 16-byte copies of a stage's [kTileN rows][kChunks chunks] weight tile, resolved once per CTA: the
// thread copies chunk c = tid % kChunks of rows tid / kChunks + it * kThreads / kChunks, and from stage to stage
// only the k offset moves. A row outside W, or a chunk past K, is zero-filled.
// Rows in stage tiles (Planes::tiled: fp8 codes or bf16, 128 bytes of a row a stage): src[it] is where the row's
// chunk would lie in a whole stage 0 of its 64-row block, a stage of a row's bytes b0 .. b0 + 127 lies 64 b0 bytes
// further, and the rows of a last, shorter stage of len bytes are len apart instead of 128. The callers' rows keep
// their place in a block (their first rows, e_row0 and a gated product's up rows are multiples of 64), so row
// r0 + it * kRowStep of the CTA is row (r0 + it * kRowStep) % 64 of its block.
template <int kChunks, int kElems>
struct ChunkCopies {
  static_assert(kThreads % kChunks == 0, "a thread keeps one chunk column");
  static constexpr int kN = kTileN * kChunks / kThreads, kRowStep = kThreads / kChunks;
  static constexpr bool kTileable = kChunks * 16 == 128;  // 128 bytes of a row a stage
  static constexpr int kElemBytes = 16 / kElems;
  const uint8_t* plane;
  const uint8_t* src[kN];
  uint32_t live;
  int c, r0;
  bool tiled;
  __device__ void init(const uint8_t* p, int64_t row_bytes, const StageSrc& s) {
    plane = p;
    c = static_cast<int>(threadIdx.x) % kChunks;
    r0 = static_cast<int>(threadIdx.x) / kChunks;
    live = 0;
    tiled = kTileable && s.w->tiled;
#pragma unroll
    for (int it = 0; it < kN; ++it) {
      int64_t wr;
      const bool ok = s.rows.row(r0 + it * kRowStep, wr);
      const int64_t w = s.e_row0 + wr;
      const int64_t at = tiled ? w / 64 * 64 * row_bytes + w % 64 * 128 : w * row_bytes;
      src[it] = ok ? p + at + c * 16 : p;
      live |= ok ? 1u << it : 0u;
    }
  }
  // dst(r, c): the chunk's shared address. Chunk c of the stage at k0 holds elements k0 + c kElems ...
  template <class Dst> __device__ void copy(Dst dst, int k0, int K, uint64_t policy) const {
    const bool k_ok = k0 + c * kElems < K;
    const int64_t adv = tiled ? static_cast<int64_t>(k0) * kElemBytes * 64 : static_cast<int64_t>(k0 / kElems) * 16;
    const int left = (K - k0) * kElemBytes;                      // the row's bytes from the stage's first
    const int short_by = tiled && left < 128 ? 128 - left : 0;  // a tiled last stage's rows are shorter
#pragma unroll
    for (int it = 0; it < kN; ++it) {
      const bool ok = k_ok && ((live >> it) & 1u);
      const int64_t at = adv - ((r0 + it * kRowStep) & 63) * short_by;
      cuda::cp_async16(dst(r0 + it * kRowStep, c), ok ? src[it] + at : plane, ok, policy);
    }
  }
};

__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}
__device__ __forceinline__ uint32_t lds32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}
__device__ __forceinline__ __nv_bfloat162 as_bf162(uint32_t v) { return *reinterpret_cast<__nv_bfloat162*>(&v); }
__device__ __forceinline__ uint32_t as_u32(__nv_bfloat162 v) { return *reinterpret_cast<uint32_t*>(&v); }
__device__ __forceinline__ __nv_bfloat162 bf162_bits(uint16_t b) { return as_bf162(b * 0x10001u); }

// Two E4M3 bytes held in bits 8-15 and 24-31 of y -> bf16x2 of their values (exact: E4M3 is a subset of bf16).
// The sign stays; exponent and mantissa move down 4 bits, which reads the value 2^-120 times too small.
__device__ __forceinline__ __nv_bfloat162 e4m3x2_hi_to_bf162(uint32_t y) {
  const uint32_t v = (y & 0x80008000u) | ((y >> 4) & 0x07F007F0u);
  return __hmul2(as_bf162(v), bf162_bits(0x7B80));  // 2^120
}

// The A fragment of mma.m16n8k16: lane (g = lane / 4, t = lane % 4) holds rows g and g + 8 at k = 2t, 2t + 1
// (registers 0 and 1) and k = 2t + 8, 2t + 9 (registers 2 and 3), as bf16 pairs, low k in the low half.

// bf16 weights: a stage is [kTileN][kTileK] bf16, swizzled; A fragments by ldmatrix.
struct WeightBf16 {
  static constexpr bool kAct8 = false, kWgmma = true;  // on sm_90a (moe_stream_stage.cuh: stage_wgmma)
  static constexpr int kTileK = 64, kStages = 4, kRowCap = 64;
  static constexpr int kLoadK = 16, kFrags = 1;  // one load_a: one k16 fragment
  static constexpr bool kPrefetch = false;
  static constexpr int kMinBlocks = 1;
  static constexpr int kStageBytes = kTileN * kTileK * 2;
  static constexpr int kKAlign = 8;
  struct Loader {
    ChunkCopies<kTileK / 8, 8> w;
    __device__ void init(const StageSrc& s) { w.init(s.w->p[0], s.w->row_bytes[0], s); }
    __device__ void load(uint32_t dst, int k0, int K, uint64_t policy) const {
      w.copy([dst](int r, int c) { return dst + swizzle<kTileK * 2>(r, c); }, k0, K, policy);
    }
  };
  __device__ static void load_a(uint32_t src, const StageSrc&, int row0, int kk, int lane, uint32_t (&a)[1][4]) {
    cuda::ldmatrix_x4(a[0], src + swizzle<kTileK * 2>(row0 + (lane & 15), kk / 8 + (lane >> 4)));
  }
  __device__ static float row_scale(const Planes&, int64_t, int64_t) { return 1.0f; }
};

// bf16 weights in passes of 128 routed rows (--moe wide): the batched step and prefill chunks route hundreds of rows
// to each expert, and a pass of 64 re-streams the expert's weights for every 64 of them. Passes of 65-128 rows run
// as wgmma n128 (the rows past the pass zero-filled); three stages of 32 KB, two CTAs per SM.
struct WeightBf16Wide : WeightBf16 {
  static constexpr int kStages = 3, kRowCap = 128;
  static constexpr int kMinBlocks = 2;
};

// The packed formats share a stage layout: code chunks of 16 bytes stored [chunk][row] (a quad of lanes reads one
// row's chunk, eight rows per warp access: conflict-free), then kScaleWords 4-byte scale words per row. Their
// passes take 32 routed rows (an expert averages 16 at canvas 256): the activation stage halves, so three CTAs fit
// on an SM, and the conversion chains get 12 warps to hide behind.
template <int kTileK_, int kElemsPerChunk, int kScaleWords_>
struct PackedStage {
  static constexpr bool kAct8 = false, kWgmma = false;
  static constexpr int kTileK = kTileK_, kRowCap = 32;
  static constexpr bool kPrefetch = true;
  static constexpr int kMinBlocks = 1;  // CTAs per SM that __launch_bounds__ asks the register allocation for
  static constexpr int kChunks = kTileK / kElemsPerChunk;
  static constexpr int kScaleWords = kScaleWords_;
  static constexpr int kCodeBytes = kChunks * kTileN * 16;
  static constexpr int kStageBytes = kCodeBytes + kTileN * kScaleWords * 4;
  __device__ static uint32_t code_addr(uint32_t base, int chunk, int r) {
    return base + static_cast<uint32_t>((chunk * kTileN + r) * 16);
  }
  __device__ static uint32_t scale_addr(uint32_t base, int r, int word) {
    return base + static_cast<uint32_t>(kCodeBytes + (r * kScaleWords + word) * 4);
  }
  // The stage's copies: code chunks of plane 0, then the format's scale words (Scales: init(s), load(dst, k0, K)).
  template <class Scales>
  struct PackedLoader {
    ChunkCopies<kChunks, kElemsPerChunk> codes;
    Scales scales;
    __device__ void init(const StageSrc& s) {
      codes.init(s.w->p[0], s.w->row_bytes[0], s);
      scales.init(s);
    }
    __device__ void load(uint32_t dst, int k0, int K, uint64_t policy) const {
      codes.copy([dst](int r, int c) { return code_addr(dst, c, r); }, k0, K, policy);
      scales.load(dst, k0, K);
    }
  };
  struct NoScales {
    __device__ void init(const StageSrc&) {}
    __device__ void load(uint32_t, int, int) const {}
  };
};

// q4: group-32 affine. A chunk is one group (16 bytes, element 2j in the low nibble of byte j); a scale word is
// the group's bf16 scale (low half) and bf16 min. w = bf16(scale * q + min), one rounding (hfma2 of exact
// operands) of the value decode_rows produces in f32.
struct WeightQ4 : PackedStage<128, 32, 4> {
  static constexpr int kStages = 2;  // 11.4 ms of expert products per step at the full shape; 3: 12.0, 4: 12.9
  static constexpr int kMinBlocks = 4;  // two 18 KB stages: four CTAs per SM if the registers allow
  static constexpr int kKAlign = 32;
  static constexpr int kLoadK = 32, kFrags = 2;  // one load_a: a whole group, both k16 fragments
  // A thread copies one weight row's four scale words of a stage (16 contiguous bytes; groups past K zero-filled)
  // in the widest copies the row's alignment allows.
  struct Scales {
    const uint8_t* src;
    int r, align;
    bool live;
    __device__ void init(const StageSrc& s) {
      static_assert(kTileN == kThreads, "a thread per weight row");
      r = static_cast<int>(threadIdx.x);
      int64_t wr;
      live = s.rows.row(r, wr);
      const int64_t rb = s.w->row_bytes[1];
      src = s.w->p[1] + (live ? (s.e_row0 + wr) * rb : 0);
      align = rb % 16 == 0 ? 16 : rb % 8 == 0 ? 8 : 4;
    }
    __device__ void load(uint32_t dst, int k0, int K) const {
      int words = live ? (K - k0) / 32 : 0;
      words = words < 0 ? 0 : words > 4 ? 4 : words;
      const uint8_t* p = src + (k0 / 32) * 4;
      const uint32_t d = scale_addr(dst, r, 0);
      if (align == 16) {
        cuda::cp_async_ca<16>(d, p, 4 * words);
      } else if (align == 8) {
        cuda::cp_async_ca<8>(d, p, 4 * (words < 2 ? words : 2));
        cuda::cp_async_ca<8>(d + 8, words > 2 ? p + 8 : p, 4 * (words > 2 ? words - 2 : 0));
      } else {
#pragma unroll
        for (int w = 0; w < 4; ++w) cuda::cp_async_ca<4>(d + 4 * w, w < words ? p + 4 * w : p, w < words ? 4 : 0);
      }
    }
  };
  using Loader = PackedLoader<Scales>;
  // Byte t of `codes` (elements 2t, 2t + 1 of a k16 half-group) -> bf16x2 weights.
  __device__ static uint32_t dequant(uint32_t codes, int t, __nv_bfloat162 scale, __nv_bfloat162 min) {
    const uint32_t b = __byte_perm(codes, 0, 0x4440u | static_cast<uint32_t>(t));
    const uint32_t v = ((b * 0x1001u) & 0x000F000Fu) | 0x43004300u;  // bf16 128 + q in each half
    const __nv_bfloat162 q = __hsub2(as_bf162(v), bf162_bits(0x4300));
    return as_u32(__hfma2(q, scale, min));
  }
  // kk: the group's first element within the stage; a[0] its k16 half 0, a[1] half 1.
  __device__ static void load_a(uint32_t src, const StageSrc&, int row0, int kk, int lane, uint32_t (&a)[2][4]) {
    const int g = lane >> 2, t = lane & 3, chunk = kk / 32;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = row0 + g + 8 * h;
      const uint4 c = lds128(code_addr(src, chunk, r));
      const uint32_t sm = lds32(scale_addr(src, r, chunk));
      const __nv_bfloat162 scale = as_bf162(__byte_perm(sm, 0, 0x1010)), min = as_bf162(__byte_perm(sm, 0, 0x3232));
      a[0][h] = dequant(c.x, t, scale, min);
      a[0][2 + h] = dequant(c.y, t, scale, min);
      a[1][h] = dequant(c.z, t, scale, min);
      a[1][2 + h] = dequant(c.w, t, scale, min);
    }
  }
  __device__ static float row_scale(const Planes&, int64_t, int64_t) { return 1.0f; }
};

// The per-row byte formats (fp8 E4M3 and q8 int8): a chunk is 16 codes = one k16 step; the row's f32 scale is
// applied in the epilogue, so the fragment holds the codes' exact values.
template <bool kFp8>
struct WeightByteRow : PackedStage<128, 16, 0> {
  static constexpr int kStages = 3;
  static constexpr int kKAlign = 16;
  static constexpr int kLoadK = 16, kFrags = 1;
  using Loader = PackedLoader<NoScales>;
  // Bytes sel, sel + 1 of `codes` -> bf16x2 of their values.
  __device__ static uint32_t dequant(uint32_t codes, uint32_t sel) {
    if constexpr (kFp8) {
      return as_u32(e4m3x2_hi_to_bf162(__byte_perm(codes, 0, 0x0404u | (sel << 4) | ((sel + 1) << 12))));
    } else {
      const auto lo = static_cast<float>(static_cast<int8_t>(__byte_perm(codes, 0, 0x4440u | sel)));
      const auto hi = static_cast<float>(static_cast<int8_t>(__byte_perm(codes, 0, 0x4440u | (sel + 1))));
      return as_u32(__floats2bfloat162_rn(lo, hi));  // exact: |q| <= 127
    }
  }
  __device__ static void load_a(uint32_t src, const StageSrc&, int row0, int kk, int lane, uint32_t (&a)[1][4]) {
    const int g = lane >> 2, t = lane & 3, chunk = kk / 16;
    const uint32_t sel = 2 * static_cast<uint32_t>(t & 1);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint4 c = lds128(code_addr(src, chunk, row0 + g + 8 * h));
      a[0][h] = dequant((t & 2) ? c.y : c.x, sel);      // bytes 2t, 2t + 1
      a[0][2 + h] = dequant((t & 2) ? c.w : c.z, sel);  // bytes 2t + 8, 2t + 9
    }
  }
  __device__ static float row_scale(const Planes& w, int64_t, int64_t row) {
    return *reinterpret_cast<const float*>(w.p[1] + row * 4);
  }
};
using WeightFp8 = WeightByteRow<true>;
using WeightQ8 = WeightByteRow<false>;

// fp8 weights times fp8 activations (W8A8, kAct8): the activation rows arrive as E4M3 codes with an f32 scale per
// row (moe_act_quant_fp8_cuda), so both operands go to the tensor cores as stored. A stage is [kTileN][kTileK] code
// bytes, swizzled like bf16's 128-byte rows, which is the 128-byte swizzle of Hopper's wgmma (kWgmma: on sm_90a the
// warpgroup multiplies both tiles straight from shared memory, core/cuda/wgmma.cuh); elsewhere (sm_89) mma m16n8k32
// e4m3 with one ldmatrix.x4 per m16k32 A fragment.
// The weight row's scale here and the activation row's scale (the kernel's) multiply the f32 sums. kStages_ 4: 96 KB
// of shared memory, two CTAs per SM on the H200; 3: 72 KB, three.
template <int kStages_>
struct WeightFp8Act8 {
  static constexpr bool kAct8 = true, kWgmma = true;
  static constexpr int kTileK = 128, kStages = kStages_, kRowCap = 64;
  static constexpr int kLoadK = 32, kFrags = 1;  // one load_a: one k32 fragment
  static constexpr bool kPrefetch = false;
  static constexpr int kMinBlocks = kStages_ == 3 ? 3 : 2;  // the CTAs per SM the shared memory allows
  static constexpr int kStageBytes = kTileN * kTileK;
  static constexpr int kKAlign = 16;
  struct Loader {
    ChunkCopies<kTileK / 16, 16> w;
    __device__ void init(const StageSrc& s) { w.init(s.w->p[0], s.w->row_bytes[0], s); }
    __device__ void load(uint32_t dst, int k0, int K, uint64_t policy) const {
      w.copy([dst](int r, int c) { return dst + swizzle<kTileK>(r, c); }, k0, K, policy);
    }
  };
  // kk: the k32 step's first code (byte) within the stage.
  __device__ static void load_a(uint32_t src, const StageSrc&, int row0, int kk, int lane, uint32_t (&a)[1][4]) {
    cuda::ldmatrix_x4(a[0], src + swizzle<kTileK>(row0 + (lane & 15), kk / 16 + (lane >> 4)));
  }
  __device__ static float row_scale(const Planes& w, int64_t, int64_t row) {
    return *reinterpret_cast<const float*>(w.p[1] + row * 4);
  }
};

// W8A8 in passes of 128 rows (--moe wide): as WeightBf16Wide, for the batched step's hundreds of rows per expert;
// wgmma e4m3 n128, three 32 KB stages.
struct WeightFp8Act8Wide : WeightFp8Act8<3> {
  static constexpr int kRowCap = 128;
  static constexpr int kMinBlocks = 1;
};

// nvfp4: E2M1 codes (two per byte, like q4), an E4M3 scale per 16 and an f32 global scale per expert (epilogue).
// w = e2m1 * e4m3 is exact in bf16. A row's kTileK / 16 scale bytes start at any byte: the stage copies the four
// aligned words around them and the fragment picks its byte by the row's misalignment.
struct WeightNvFp4 : PackedStage<128, 32, 4> {
  static constexpr int kStages = 3;
  static constexpr int kKAlign = 32;
  static constexpr int kLoadK = 32, kFrags = 2;  // one load_a: a 32-element chunk, both k16 fragments
  __device__ static int64_t scale_byte(const StageSrc& s, int64_t row) {
    return row * s.w->row_bytes[1] + s.k0 / 16;
  }
  // A thread copies the four aligned scale words around one weight row's kTileK / 16 block scales of a stage.
  struct Scales {
    const uint8_t* plane;
    int64_t at0, limit;  // the row's first aligned word at k0 = 0; the plane's readable bytes
    int r;
    bool live;
    __device__ void init(const StageSrc& s) {
      static_assert(kTileN == kThreads, "a thread per weight row");
      r = static_cast<int>(threadIdx.x);
      int64_t wr;
      live = s.rows.row(r, wr);
      plane = s.w->p[1];
      limit = s.w->limit[1];
      at0 = live ? ((s.e_row0 + wr) * s.w->row_bytes[1]) & ~int64_t{3} : 0;
    }
    __device__ void load(uint32_t dst, int k0, int) const {
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const int64_t at = at0 + k0 / 16 + 4 * w;  // k0 / 16 is a multiple of 8: the alignment stays
        const bool ok = live && at + 4 <= limit;
        cuda::cp_async_ca<4>(scale_addr(dst, r, w), ok ? plane + at : plane, ok ? 4 : 0);
      }
    }
  };
  using Loader = PackedLoader<Scales>;
  // Byte t of `codes` (two E2M1 nibbles) times the bf16x2 block scale.
  __device__ static uint32_t dequant(uint32_t codes, int t, __nv_bfloat162 scale) {
    const uint32_t b = __byte_perm(codes, 0, 0x4440u | static_cast<uint32_t>(t));
    // Magnitude bits (exponent 2, mantissa 1) of each nibble at bf16 bits 6-8: the value times 2^-126, subnormal
    // codes included; signs to bits 15 and 31.
    const uint32_t v = ((b * 0x00040040u) & 0x01C001C0u) | ((b * 0x01001000u) & 0x80008000u);
    return as_u32(__hmul2(__hmul2(as_bf162(v), bf162_bits(0x7E80)), scale));  // 2^126
  }
  __device__ static void load_a(uint32_t src, const StageSrc& s, int row0, int kk, int lane, uint32_t (&a)[2][4]) {
    const int g = lane >> 2, t = lane & 3, chunk = kk / 32;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = row0 + g + 8 * h;
      int64_t wr;
      s.rows.row(r, wr);
      const uint4 c = lds128(code_addr(src, chunk, r));
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int at = static_cast<int>(scale_byte(s, s.e_row0 + wr) & 3) + kk / 16 + half;
        const uint32_t sb = (lds32(scale_addr(src, r, at >> 2)) >> (8 * (at & 3))) & 0xFFu;
        const __nv_bfloat162 scale = e4m3x2_hi_to_bf162((sb << 8) | (sb << 24));
        a[half][h] = dequant(half ? c.z : c.x, t, scale);
        a[half][2 + h] = dequant(half ? c.w : c.y, t, scale);
      }
    }
  }
  __device__ static float row_scale(const Planes& w, int64_t e, int64_t) {
    return *reinterpret_cast<const float*>(w.p[2] + e * 4);
  }
};

}  // namespace dg::moe_stream
