// The expert products of q4 weights (the kernel layout, WeightLayout::kKernel, or its stage tiles, kTiled) with bf16
// activations as a persistent, warp-specialised wgmma kernel on sm_90a (--moe ws): the CTA of moe_ws.cu (a producer
// warpgroup, consumer warpgroups on 256 weight rows in all, stage buffers handed over through mbarriers, tiles walked
// so that neighbouring CTAs share a weight slice) with q4's stage of 128 elements a row: in the kernel layout the rows'
// 64 code bytes as TMA boxes issued by one thread and their four scale words by cp.async; in stage tiles one bulk copy
// a 64-row unit, codes and scales together; the pass's bf16 activation rows by cp.async. The producer keeps kStages
// stages of 20 KB of weights in flight whatever the consumers hold in registers, where the streaming kernel's CTAs each
// keep one stage ahead. A consumer turns its rows' codes into wgmma A fragments in registers as the streaming kernel's
// WeightQ4Kernel does (the same bf16 weights) and multiplies them by the activations in shared memory, k16 steps in
// the streaming kernel's order into f32 accumulators, the matrix's factor 2^p and the gated GELU in the epilogue: the
// streaming kernel's bits. Passes of up to 64 routed rows (n16 .. n64: the stage's 64 A registers and the
// accumulators fit beside each other). The consumers are two warpgroups of two m64 tiles each, or four of one (kTiles,
// --moe-q4-consumers): twice the converting warps, the gated form's gate and up rows of one output in a pair of them,
// joined through the staging rows; the same products and roundings either way.
// Design: docs/EXPERTS.md ("q4 in the warp-specialised kernel", "q4 in stage tiles"). Oracle: the streaming kernel, bit
// for bit, and f64 loops (tests/ops/moe_stream_quant_test.cpp, MoeWsQ4Cuda).
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "core/cuda/mbarrier.cuh"
#include "core/cuda/mma.cuh"
#include "core/cuda/wgmma.cuh"
#include "ops/moe/moe_cuda.h"
#include "ops/moe/moe_stream_formats.cuh"
#include "ops/moe/moe_stream_q4.cuh"
#include "ops/moe/moe_stream_stage.cuh"
#include "ops/moe/moe_ws_common.cuh"
#include "ops/moe/q4_layout.h"

namespace dg {
namespace {

using namespace moe_ws;
using moe_stream::Planes;

[[maybe_unused]] constexpr int kStageK = 128;    // elements of a row per stage: four groups of 32
constexpr int kCodeRow = 64, kScaleRow = 16;     // a row's bytes of a stage: codes, scale words
constexpr int kRows = kWsQ4PassRows;             // routed rows per pass
constexpr int kStages = 4;
// A tile's 256 weight rows are kConsumers (= 2) column owners' 128 each, moe_ws.cu's consumers: `pairs` below. Four
// m64 units of 64 rows: unit u is pair u / 2's gate rows (u even) or up rows (u odd) in the gated form, its first or
// second 64 columns otherwise. A consumer warpgroup multiplies kTiles units (2: units 2c, 2c + 1; 1: unit c).
constexpr int kUnits = 2 * kConsumers;
template <int kTiles> constexpr int kQ4Consumers = kUnits / kTiles;
template <int kTiles> constexpr int kQ4Threads = (kQ4Consumers<kTiles> + 1) * kWgThreads;
constexpr int kCodeBytes = kConsumers * kWRows * kCodeRow;    // unit 0's rows first
constexpr int kScaleBytes = kConsumers * kWRows * kScaleRow;  // then the rows' scale words
constexpr int kXBlock = kRows * 128;  // then the activation rows as two 128-byte column blocks (64 elements each)
// The tiled form (WeightLayout::kTiled): unit u's codes and scale words as one tile of 64 rows at kTileBytes u, the
// same bytes as the two regions above.
constexpr int kTileBytes = 64 * (kCodeRow + kScaleRow);
static_assert(4 * kTileBytes == kCodeBytes + kScaleBytes && kTileBytes == q4_tiled_chunk(0, 1, 0),
              "the tiles fill the codes' and scales' regions, one stage of the tiled form's 64 rows each");
constexpr int kStageBytes = kCodeBytes + kScaleBytes + 2 * kXBlock;
static_assert((kCodeBytes + kScaleBytes) % 1024 == 0 && kStageBytes % 1024 == 0,
              "the activation blocks 1024-byte aligned (the 128-byte swizzle's period)");
// Registers per thread after setmaxnreg. setmaxnreg moves registers within the CTA's launch allocation (threads x
// the count ptxas gives under __launch_bounds__(threads, 1): 168 at 384 threads, 96 at 640), so the warpgroups'
// sum must fit that, not the SM's 65,536: a consumer's increase that finds no free registers waits forever.
// 2 x 128 x 216 + 128 x 72 = 64,512 = 384 x 168; 4 x 128 x 104 + 128 x 64 = 61,440 = 640 x 96.
template <int kTiles> constexpr int kProducerRegs = kTiles == 2 ? 72 : 64;
template <int kTiles> constexpr int kConsumerRegs = kTiles == 2 ? 216 : 104;
template <int kTiles> constexpr int kLaunchRegs = (65536 / kQ4Threads<kTiles>) & ~7;
template <int kTiles>
constexpr bool kRegsFit =
    kQ4Consumers<kTiles> * kWgThreads * kConsumerRegs<kTiles> + kWgThreads * kProducerRegs<kTiles> <=
    kQ4Threads<kTiles> * kLaunchRegs<kTiles>;
static_assert(kRegsFit<2> && kRegsFit<1>, "the warpgroups' registers fit the CTA's launch allocation");
template <bool kGated>
constexpr int kSmemBytes = 1024 + kStages * kStageBytes + kConsumers * kRows * kOutStride<kGated> * 2;
static_assert(kSmemBytes<false> + kTableBytes + 64 <= 227 * 1024,
              "the stages, the staging rows and the tables fit an SM's shared memory");

struct WsQ4Args {
  CUtensorMap cmap;       // plane 0 as [n_exp * w_rows rows, K / 2 bytes]: boxes of 64 rows x 64 bytes, unswizzled
  const uint8_t* x;       // bf16 activation rows [*, K]
  const int32_t* x_rows;  // sorted position i -> x row x_rows[i] / x_rows_div; null: x row i
  int x_rows_div;
  int K;
  int scale_align;        // bytes (16, 8 or 4) that every stage's scale words of a row are aligned to
  int tiled;              // W in the tiled form (WeightLayout::kTiled): a stage's 64 rows one bulk copy, codes and
                          // scales
  Planes W;               // codes (plane 0), scale words (plane 1, K / 32 a row), f32 2^p per matrix (plane 2); tiled:
                          // the tiles (plane 0) and the factors (plane 2)
  int64_t w_rows;
  int64_t n_out;          // output columns: w_rows, or ff = w_rows / 2 in the gated form
  const int32_t* offsets;  // [n_exp + 1]
  int n_exp;
  bf16* y;                // [pairs, n_out], row i = sorted position i
};

// The rows a pass of m routed rows multiplies: m rounded up to whole n16 products (the rest zero-filled).
[[maybe_unused]] __device__ __forceinline__ int pass_rows(int m) { return (m + 15) & ~15; }

#if DG_HAS_WGMMA

// A consumer's stage at `st` (n groups of the row) into its kTiles units' A fragments.
template <int kTiles, bool kTiled>
__device__ __forceinline__ void convert_stage(uint32_t st, int n, int c, int warp, int lane,
                                              uint32_t (&af)[kTiles][8][4]) {
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int rr = 16 * warp + (lane >> 2) + 8 * h;  // the row of the unit
      uint32_t code;
      uint4 sc;
      if constexpr (kTiled) {  // the unit's tile: its rows' 16 n code bytes, then their 4 n scale bytes
        const uint32_t unit = st + static_cast<uint32_t>(kTileBytes * (kTiles * c + t));
        code = unit + static_cast<uint32_t>(q4_tile_codes_at(rr, n));
        const uint32_t sa = unit + static_cast<uint32_t>(q4_tile_scales_at(rr, n));
        sc = n == 4 ? moe_stream::lds128(sa)
                    : make_uint4(moe_stream::lds32(sa), n > 1 ? moe_stream::lds32(sa + 4) : 0u,
                                 n > 2 ? moe_stream::lds32(sa + 8) : 0u, 0u);
      } else {
        const int r = 64 * (kTiles * c + t) + rr;  // of the stage
        code = st + static_cast<uint32_t>(r * kCodeRow);
        sc = moe_stream::lds128(st + kCodeBytes + static_cast<uint32_t>(r * kScaleRow));
      }
      moe_stream::q4k_fragments(sc, moe_stream::q4k_code_words(code, n, lane & 3), h, af[t]);
    }
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int f = 0; f < 8; ++f)
#pragma unroll
      for (int q = 0; q < 4; ++q) asm volatile("" : "+r"(af[t][f][q])::"memory");
}

// The eight k16 products of a stage: its activations at `st`'s blocks times the units' fragments.
template <int N, int kTiles>
__device__ __forceinline__ void issue_products(float (&acc)[kTiles][N / 8][4], const uint32_t (&af)[kTiles][8][4],
                                               uint32_t st) {
  const uint64_t xd = cuda::wgmma_desc_sw128(st + kCodeBytes + kScaleBytes);
#pragma unroll
  for (int f = 0; f < 8; ++f) {
    const uint64_t b = cuda::wgmma_desc_plus(xd, (f >> 2) * kXBlock + 32 * (f & 3));
#pragma unroll
    for (int t = 0; t < kTiles; ++t) cuda::wgmma_bf16_rs_m64k16<N>(acc[t], af[t][f], b);
  }
}

// A consumer's pass over one tile: per stage, its kTiles m64 units' A fragments converted from the codes, the eight
// k16 products of each (the streaming kernel's order: step f for every unit, then f + 1), drained before the stage
// goes back (the A registers are the next stage's). Then the factor 2^p (and the gated GELU) into bf16 rows in the
// pair's staging area `out` [routed row][column]. Accumulator element q of n8 tile j of unit t: weight row
// 16 warp + lane / 4 + 8 (q / 2) of the unit, routed row 8 j + 2 (lane % 4) + q % 2. With one unit a consumer
// (kTiles 1), the gated form's gate consumer leaves bf16(GELU(gate)) in the staging rows and, after a barrier of the
// pair, the up consumer multiplies it by its own rows: the bits of kTiles 2, which has both in registers.
template <bool kGated, int N, int kTiles, bool kTiled>
__device__ __forceinline__ void consume_pass(const WsQ4Args& a, const WsTile& tl, uint32_t base, uint32_t full,
                                             uint32_t empty, int c, int n_k, uint32_t& it, bf16* out) {
  float acc[kTiles][N / 8][4];
  moe_stream::zero_acc(acc);
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = (static_cast<int>(threadIdx.x) >> 5) & 3;
  const int groups = a.K / 32;
  for (int kt = 0; kt < n_k; ++kt, ++it) {
    const uint32_t s = it % kStages;
    cuda::mbar_wait(full + 8 * s, (it / kStages) & 1u);
    cuda::fence_proxy_async_shared();  // the producer's cp.async activation rows, which wgmma reads
    const uint32_t st = base + s * kStageBytes;
    uint32_t af[kTiles][8][4];
    convert_stage<kTiles, kTiled>(st, q4_stage_groups(kt, groups), c, warp, lane, af);
    moe_stream::fence_acc(acc);
    cuda::wgmma_fence();
    issue_products<N, kTiles>(acc, af, st);
    cuda::wgmma_commit();
    cuda::wgmma_wait<0>();
    moe_stream::fence_acc(acc);
    cuda::mbar_arrive(empty + 8 * s);
  }
  const int pair = kTiles * c / 2;
  const TileRows rows = consumer_rows<kGated>(a.n_out, tl.ct, pair);
  const float factor = *reinterpret_cast<const float*>(a.W.p[2] + static_cast<int64_t>(tl.e) * 4);
  float rs[kTiles][2];  // the factor, 0 for rows past the pair's valid ones
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int u = (kTiles * c + t) & 1;  // the unit's place in its pair
      int64_t w;
      rs[t][hh] = rows.row(64 * u + 16 * warp + (lane >> 2) + 8 * hh, w) ? factor : 0.0f;
    }
  const int u0 = (kTiles * c) & 1;  // the first unit's place in its pair (kTiles 1: gate 0 or up 1)
#pragma unroll
  for (int j = 0; j < N / 8; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const auto [i, col] = acc_pos(j, q, lane, warp);
      const float f0 = acc[0][j][q] * rs[0][q >> 1];
      bf16& o = out[i * kOutStride<kGated> + col];
      if constexpr (kTiles == 2) {
        const float f1 = acc[1][j][q] * rs[1][q >> 1];
        if constexpr (kGated) {  // as gelu_mul_split_cuda on the bf16 products
          const float g = cuda::rbf(f0), u = cuda::rbf(f1);
          o = __float2bfloat16_rn(cuda::rbf(cuda::gelu_tanh(g)) * u);
        } else {
          o = __float2bfloat16_rn(f0);
          out[i * kOutStride<kGated> + col + 64] = __float2bfloat16_rn(f1);
        }
      } else if constexpr (kGated) {
        if (u0 == 0) o = __float2bfloat16_rn(cuda::gelu_tanh(cuda::rbf(f0)));  // exact: rounds as rbf
      } else {
        out[i * kOutStride<kGated> + col + 64 * u0] = __float2bfloat16_rn(f0);
      }
    }
  if constexpr (kTiles == 1 && kGated) {
    cuda::named_sync(1 + pair, 2 * kWgThreads);  // the gate consumer's GELU rows are in `out`
    if (u0 == 1) {
#pragma unroll
      for (int j = 0; j < N / 8; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const auto [i, col] = acc_pos(j, q, lane, warp);
          bf16& o = out[i * kOutStride<kGated> + col];
          o = __float2bfloat16_rn(__bfloat162float(o) * cuda::rbf(acc[0][j][q] * rs[0][q >> 1]));
        }
    }
  }
}

// A row's scale words of stage kt (n of them, the rest zero-filled) into dst, from its words at `row` (null: all
// zero).
__device__ __forceinline__ void copy_scales(const WsQ4Args& a, uint32_t dst, const uint8_t* row, int kt, int groups) {
  const int left = groups - 4 * kt, n = row == nullptr ? 0 : left < 4 ? left : 4;
  const uint8_t* src = row == nullptr ? a.W.p[1] : row + 16 * kt;
  if (a.scale_align == 16) {
    cuda::cp_async_ca<16>(dst, src, 4 * n);
  } else if (a.scale_align == 8) {
    cuda::cp_async_ca<8>(dst, src, 4 * (n < 2 ? n : 2));
    cuda::cp_async_ca<8>(dst + 8, n > 2 ? src + 8 : src, 4 * (n > 2 ? n - 2 : 0));
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k) cuda::cp_async_ca<4>(dst + 4 * k, k < n ? src + 4 * k : src, k < n ? 4 : 0);
  }
}

#endif  // DG_HAS_WGMMA

template <bool kGated, int kTiles, bool kTiled>
__global__ void __launch_bounds__(kQ4Threads<kTiles>, 1) moe_ws_q4_kernel(const __grid_constant__ WsQ4Args a) {
  cuda::pdl_enter();
#if DG_HAS_WGMMA
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ int32_t s_off[kMaxExperts + 1];    // the experts' offsets
  __shared__ int32_t s_tile0[kMaxExperts + 1];  // each expert's first tile; [n_exp]: the tiles in all
  __shared__ __align__(8) uint64_t s_full[kStages], s_empty[kStages];
  const int tid = static_cast<int>(threadIdx.x), wg = tid / kWgThreads;
  const int E = a.n_exp;
  const uint32_t base = (cuda::smem_u32(smem) + 1023u) & ~1023u;
  const uint32_t full = cuda::smem_u32(s_full), empty = cuda::smem_u32(s_empty);
  constexpr int kCons = kQ4Consumers<kTiles>;
  const int n_tiles = prologue<kStages>(full, empty, a.offsets, E, col_tiles<kGated>(a.n_out), kRows, s_off, s_tile0,
                                        kCons * kWgThreads);
  const int groups = a.K / 32;
  const int n_k = (a.K + kStageK - 1) / kStageK;
  auto tile_at = [&](int t) { return ws_tile_at(t, s_tile0, s_off, E, kRows); };

  if (wg == kCons) {  // the producer
    cuda::regs_dec<kProducerRegs<kTiles>>();
    const int pt = tid - kCons * kWgThreads, chunk = pt & 15, row8 = pt >> 4;  // 8 rows x 16 chunks a sweep
    const int64_t all_rows = static_cast<int64_t>(E) * a.w_rows;
    uint32_t it = 0;
    for (int t = static_cast<int>(blockIdx.x); t < n_tiles; t += static_cast<int>(gridDim.x)) {
      const WsTile tl = tile_at(t);
      const int n_load = pass_rows(tl.m);
      // Consumer cc's rows as two TMA boxes of 64 (gated: its 64 gate rows and the 64 up rows of the same outputs);
      // thread pt copies the scale words of row pt of each consumer's 128. Rows past a consumer's `valid` are read
      // as they lie (zeros past W's end): their products fall in columns that are never stored.
      static_assert(kConsumers == 2 && kWRows == 128 && kWgThreads == 128, "two pairs of two 64-row boxes");
      // Tiled: a box whose rows are all past the consumer's valid ones is not copied (its products are never
      // stored; the buffer keeps an older stage's bytes).
      int box_row[kConsumers][2];
      bool box_live[kConsumers][2];
      const uint8_t* scale_src[kConsumers];  // the row's scale words; null past W's end
#pragma unroll
      for (int cc = 0; cc < kConsumers; ++cc) {
        const TileRows tr = consumer_rows<kGated>(a.n_out, tl.ct, cc);
        const int64_t e0 = static_cast<int64_t>(tl.e) * a.w_rows;
        box_row[cc][0] = static_cast<int>(e0 + tr.first);
        box_row[cc][1] = static_cast<int>(kGated ? e0 + tr.second : e0 + tr.first + 64);
        box_live[cc][0] = tr.valid > 0;
        box_live[cc][1] = tr.valid > (kGated ? 0 : 64);
        const int64_t w = pt < 64 ? box_row[cc][0] + pt : box_row[cc][1] + pt - 64;
        scale_src[cc] = w < all_rows ? a.W.p[1] + w * groups * 4 : nullptr;
      }
      // Pass row row8 + 8 j's chunk at k = 0 (null: zero-filled); in the stage at x_dst + 1024 j (the swizzle of
      // row i permutes by i % 8 = row8).
      const uint8_t* x_src[kRows / 8];
#pragma unroll
      for (int j = 0; j < kRows / 8; ++j) {
        const int i = row8 + 8 * j;
        const int64_t r = i < tl.m ? (a.x_rows ? a.x_rows[tl.r0 + i] / a.x_rows_div : tl.r0 + i) : -1;
        x_src[j] = r >= 0 ? a.x + (r * a.K + chunk * 8) * 2 : nullptr;
      }
      const uint32_t x_dst = kCodeBytes + kScaleBytes + (chunk >> 3) * kXBlock + moe_stream::swizzle<128>(row8, chunk & 7);
      const int x_loads = (n_load - row8 + 7) / 8;  // this thread's pass rows
      for (int kt = 0; kt < n_k; ++kt, ++it) {
        const uint32_t s = it % kStages;
        if (it >= kStages) cuda::mbar_wait(empty + 8 * s, (it / kStages - 1) & 1u);
        const uint32_t st = base + s * kStageBytes, bar = full + 8 * s;
        if (kTiled && pt == 0) {  // codes and scales: a tile of each live box, their bytes counted on the barrier
          const int left = groups - 4 * kt;
          const uint32_t bytes = static_cast<uint32_t>(kTileBytes / 4 * (left < 4 ? left : 4));
          uint32_t all = 0;
#pragma unroll
          for (int cc = 0; cc < kConsumers; ++cc)
#pragma unroll
            for (int b = 0; b < 2; ++b) all += box_live[cc][b] ? bytes : 0u;
          cuda::mbar_arrive_expect_tx(bar, all);
#pragma unroll
          for (int cc = 0; cc < kConsumers; ++cc)
#pragma unroll
            for (int b = 0; b < 2; ++b)
              if (box_live[cc][b])
                cuda::bulk_load(st + (2 * cc + b) * kTileBytes,
                                a.W.p[0] + q4_tiled_chunk(box_row[cc][b] / kQ4TileRows, kt, groups), bytes, bar);
        } else if (pt == 0) {  // the codes: four boxes, their bytes counted on the stage's barrier
          cuda::mbar_arrive_expect_tx(bar, kCodeBytes);
#pragma unroll
          for (int cc = 0; cc < kConsumers; ++cc)
#pragma unroll
            for (int b = 0; b < 2; ++b)
              cuda::tma_load_2d(st + (cc * kWRows + 64 * b) * kCodeRow, &a.cmap, kt * kCodeRow, box_row[cc][b], bar);
        }
        if constexpr (!kTiled) {
#pragma unroll
          for (int cc = 0; cc < kConsumers; ++cc)
            copy_scales(a, st + kCodeBytes + (cc * kWRows + pt) * kScaleRow, scale_src[cc], kt, groups);
        }
        const int k0 = kt * kStageK;
        const bool k_ok = k0 + chunk * 8 < a.K;
#pragma unroll
        for (int j = 0; j < kRows / 8; ++j) {
          if (j >= x_loads) break;
          const bool ok = k_ok && x_src[j] != nullptr;
          cuda::cp_async16(st + x_dst + 1024 * j, ok ? x_src[j] + 2 * k0 : a.x, ok);
        }
        cuda::cp_async_mbar_arrive(bar);  // once this thread's copies of the stage have landed
      }
    }
    return;
  }

  cuda::regs_inc<kConsumerRegs<kTiles>>();
  // The warpgroups of pair `pair` (one, or two with kTiles 1) share its staging rows and named barrier 1 + pair.
  constexpr int kPairThreads = 2 * kWgThreads / kTiles;
  const int c = wg, pair = kTiles * c / 2, ptid = tid - pair * kPairThreads;
  bf16* out = reinterpret_cast<bf16*>(smem + (base - cuda::smem_u32(smem)) + kStages * kStageBytes) +
              pair * kRows * kOutStride<kGated>;
  uint32_t it = 0;
  for (int t = static_cast<int>(blockIdx.x); t < n_tiles; t += static_cast<int>(gridDim.x)) {
    const WsTile tl = tile_at(t);
    cuda::named_sync(1 + pair, kPairThreads);  // the last tile's reads of the staging rows are done
    switch (pass_rows(tl.m)) {
      case 16: consume_pass<kGated, 16, kTiles, kTiled>(a, tl, base, full, empty, c, n_k, it, out); break;
      case 32: consume_pass<kGated, 32, kTiles, kTiled>(a, tl, base, full, empty, c, n_k, it, out); break;
      case 48: consume_pass<kGated, 48, kTiles, kTiled>(a, tl, base, full, empty, c, n_k, it, out); break;
      default: consume_pass<kGated, 64, kTiles, kTiled>(a, tl, base, full, empty, c, n_k, it, out); break;
    }
    const TileRows rows = consumer_rows<kGated>(a.n_out, tl.ct, pair);
    cuda::named_sync(1 + pair, kPairThreads);
    moe_stream::store_staged_rows<kOutStride<kGated>, kPairThreads>(out, a.y, a.n_out, tl.r0, tl.m, rows, ptid);
  }
#else
  (void)a;
  __trap();  // the launcher refuses devices without sm_90a code
#endif
}

Status q4_limits(const std::string& name, int64_t K, int64_t n_exp, int64_t w_rows, int64_t x_rows_max) {
  return limits(name, DType::kQ4, 32, 2, K, n_exp, w_rows, x_rows_max, "--moe stream");
}

template <bool kGated, int kTiles>
Status launch_q4(WsQ4Args a, const void* W, int64_t n_exp, int64_t x_rows_max, cudaStream_t s, const char* what) {
  const std::string name(what);
  if (Status st = q4_limits(name, a.K, n_exp, a.w_rows, x_rows_max); !st.is_ok()) return st;
  if (((reinterpret_cast<uintptr_t>(a.x) | reinterpret_cast<uintptr_t>(W)) & 15) != 0)
    return Status::error(name + ": x and W must be 16-byte aligned");
  if (a.tiled && !q4_tiled_ok(Shape{n_exp, a.w_rows, a.K}))
    return Status::error(name + ": q4 weights in the tiled form need rows a multiple of 128, not " +
                         std::to_string(a.w_rows));
  a.n_exp = static_cast<int>(n_exp);
  a.W = moe_stream::weight_planes(W, DType::kQ4, n_exp, a.w_rows, a.K, WeightLayout::kKernel);
  const uintptr_t at = reinterpret_cast<uintptr_t>(a.W.p[1]) | static_cast<uintptr_t>(a.K / 32 * 4);
  a.scale_align = at % 16 == 0 ? 16 : at % 8 == 0 ? 8 : 4;
  // Tiled: the tiles start where plane 0 does (the blob's start), the factors stay in plane 2. Otherwise the codes
  // as stored: [rows] rows of K / 2 bytes in boxes of 64 rows x 64 bytes, zeros past K (a row's last, shorter stage).
  if (!a.tiled) {
    if (Status st = rows_map(a.W.p[0], CU_TENSOR_MAP_DATA_TYPE_UINT8, a.K / 2, n_exp * a.w_rows, a.W.row_bytes[0],
                             kCodeRow, CU_TENSOR_MAP_SWIZZLE_NONE, a.cmap, name, "the q4 codes");
        !st.is_ok())
      return st;
  }
  auto* kernel =
      a.tiled ? moe_ws_q4_kernel<kGated, kTiles, true> : moe_ws_q4_kernel<kGated, kTiles, false>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes<kGated>);
  if (err != cudaSuccess) return cuda_status(err, what);
  cuda::launch(kernel, dim3(static_cast<unsigned>(cuda::sm_count())), kQ4Threads<kTiles>, kSmemBytes<kGated>, s, a);
  return cuda_status(cudaGetLastError(), what);
}

}  // namespace

bool moe_ws_q4_takes(int64_t K, int64_t n_exp, int64_t w_rows, int64_t x_rows_max) {
  return q4_limits("", K, n_exp, w_rows, x_rows_max).is_ok();
}

Status moe_ws::q4_products(bool gated, const void* x, const int32_t* x_rows, int x_rows_div, int64_t x_rows_max,
                           int64_t K, const void* W, int64_t w_rows, int64_t n_out, int64_t n_exp,
                           const int32_t* offsets, void* y, cudaStream_t s, const char* what,
                           const MoeWsForm& form) {
  if (form.consumers != 2 && form.consumers != 4)
    return Status::error(std::string(what) + ": q4 consumers must be 2 or 4 (--moe-q4-consumers), not " +
                         std::to_string(form.consumers));
  if (form.layout != WeightLayout::kKernel && form.layout != WeightLayout::kTiled)
    return Status::error(std::string(what) + ": --moe ws reads q4 weights in the kernel layout or its tiled form, "
                                             "not the disk layout");
  const WsQ4Args a{{}, static_cast<const uint8_t*>(x), x_rows, x_rows_div, static_cast<int>(K), 16,
                   form.layout == WeightLayout::kTiled ? 1 : 0, {}, w_rows, n_out, offsets, 0, static_cast<bf16*>(y)};
  if (form.consumers == 4)
    return gated ? launch_q4<true, 1>(a, W, n_exp, x_rows_max, s, what)
                 : launch_q4<false, 1>(a, W, n_exp, x_rows_max, s, what);
  return gated ? launch_q4<true, 2>(a, W, n_exp, x_rows_max, s, what)
               : launch_q4<false, 2>(a, W, n_exp, x_rows_max, s, what);
}

}  // namespace dg
