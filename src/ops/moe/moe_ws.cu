// The expert products for many routed rows per expert (the batched step, prefill chunks; --moe ws), W8A8 or bf16,
// as a persistent, warp-specialised wgmma kernel on sm_90a. Each CTA has three warpgroups: a producer that copies the
// stages (the weights as TMA boxes issued by one thread, from W's rows or their stage tiles (row_tiles.h);
// the routed rows by cp.async, each thread's copies arriving on the stage's barrier when they land) and two
// consumers that multiply them, handing the stage buffers back and forth through mbarriers instead of CTA-wide
// barriers. A tile is 256 weight rows (128 per consumer: two m64 wgmma tiles) by a
// pass of up to 128 of one expert's routed rows; the CTAs walk the tiles in an order where neighbours share their
// weights (the passes of one weight slice are consecutive), so the slice is read from HBM about once and from L2
// by the others. The arithmetic is the streaming kernel's wide passes (moe_stream.cu): W8A8 as WeightFp8Act8Wide
// (e4m3 products summed by the tensor cores over one 128-code stage, added to f32 accumulators, both scales and
// the gated GELU in the epilogue), bf16 as WeightBf16Wide (the products accumulated in f32 by the tensor cores, k
// in the same order; here a stage's products stay in flight while the next stage's are issued): the same bits.
// Design and the measurements behind it: docs/EXPERTS.md ("The warp-specialised expert kernel").
// Oracle: moe_experts_cpu (tests/ops/moe_stream_quant_test.cpp, MoeWsCuda).
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "core/cuda/mbarrier.cuh"
#include "core/cuda/mma.cuh"
#include "core/cuda/wgmma.cuh"
#include "core/cuda/wgmma_e4m3_stage.cuh"
#include "ops/moe/moe_cuda.h"
#include "ops/moe/moe_stream_formats.cuh"
#include "ops/moe/moe_stream_stage.cuh"
#include "ops/moe/moe_ws_common.cuh"
#include "ops/moe/row_tiles.h"

namespace dg {
namespace {

using cuda::bf16;
using moe_stream::Planes;
using moe_stream::TileRows;

using namespace moe_ws;

constexpr int kTileK = 128;                              // bytes of a row per stage: 128 codes or 64 bf16
constexpr int kRows = kWsPassRows;                       // routed rows per pass
constexpr int kStages = 3;
constexpr int kWBytes = kConsumers * kWRows * kTileK;    // a stage's weight tile, consumer 0's rows first
constexpr int kStageBytes = kWBytes + kRows * kTileK;    // then the pass's activation rows
// Registers per thread after setmaxnreg: 2 x 128 x 216 + 128 x 72 = 64,512 of the SM's 65,536.
[[maybe_unused]] constexpr int kProducerRegs = 72, kConsumerRegs = 216;
template <bool kGated>
constexpr int kSmemBytes = 1024 + kStages * kStageBytes + kConsumers * kRows * kOutStride<kGated> * 2;
// The kernel's static shared memory (offsets, first tiles, activation scales, barriers) and the dynamic part above
// within the 227 KB a block may have on sm_90.
static_assert(kSmemBytes<false> + kTableBytes + kConsumers * kRows * 4 + 64 <= 227 * 1024,
              "the stages, the staging rows and the tables fit an SM's shared memory");

struct WsArgs {
  CUtensorMap wmap;       // W's rows [n_exp * w_rows, K] (plane 0) for TMA: boxes of 64 rows x 128 bytes, swizzled;
                          // tiled: the whole stages of each 64-row block (tiled_map)
  CUtensorMap smap;       // tiled, rows not a multiple of 128 bytes: each block's last, shorter stage (tiled_map)
  bool tiled;             // W's rows in stage tiles (row_tiles.h)
  const uint8_t* x;       // activation rows [*, K]: E4M3 codes (W8A8) or bf16
  const float* x_scale;   // W8A8: the f32 scale of each x row
  const int32_t* x_rows;  // sorted position i -> x row x_rows[i] / x_rows_div; null: x row i
  int x_rows_div;
  int K;
  Planes W;               // [n_exp, w_rows, K]: E4M3 codes (plane 0) and f32 row scales (plane 1), or bf16
  int64_t w_rows;
  int64_t n_out;          // output columns: w_rows, or ff = w_rows / 2 in the gated form
  const int32_t* offsets;  // [n_exp + 1]
  int n_exp;
  bf16* y;                // [pairs, n_out], row i = sorted position i
};

// The rows a pass of m routed rows multiplies (the rest of them zero-filled): wgmma n64 up to 64, else n128. More
// sizes (n16 .. n48, as the streaming kernel has) made ptxas serialise the wgmma products (C7511) in one variant
// or the other.
[[maybe_unused]] __device__ __forceinline__ int pass_rows(int m) { return m > 64 ? 128 : 64; }

using Tile = WsTile;  // where tile t lies: the expert, its pass and the CTA's column tile (moe_ws_tiles.h)

#if DG_HAS_WGMMA

// bf16: the stage's products accumulate in the f32 registers themselves, k16 steps in the streaming kernel's order
// (WeightBf16Wide: each step for both m64 tiles); the caller waits for them a stage later.
template <int N>
__device__ __forceinline__ void issue_stage_bf16(uint32_t ws, uint32_t xs, float (&acc)[2][kRows / 8][4]) {
  cuda::wgmma_fence();
  const uint64_t w_d = cuda::wgmma_desc_sw128(ws), x_d = cuda::wgmma_desc_sw128(xs);
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    const uint64_t b = cuda::wgmma_desc_plus(x_d, 32 * ks);
#pragma unroll
    for (int t = 0; t < 2; ++t)
      cuda::wgmma_bf16_m64k16<N>(acc[t], cuda::wgmma_desc_plus(w_d, t * 64 * kTileK + 32 * ks), b);
  }
  cuda::wgmma_commit();
}

// A consumer's pass over one tile: for each stage, wait for it, multiply it, hand its buffer back (`it` counts
// the stages this CTA has consumed, as the producer's does); then the scaled products (and the gated GELU) as bf16
// rows in the consumer's staging area `out` [routed row][column]. Each pass row count N is its own instantiation,
// accumulators included: the wgmma pipeline keeps its registers (a switch between loops over one accumulator array
// made ptxas serialise the products, C7511). W8A8 drains each stage's products to promote them; bf16 keeps one
// stage's in flight and hands a buffer back once the products after it have been issued.
// Accumulator element q of n8 tile j of m64 tile t: weight row 64 t + 16 warp + lane / 4 + 8 (q / 2) of the
// consumer's rows, routed row 8 j + 2 (lane % 4) + q % 2.
template <bool kGated, bool kAct8, int N>
__device__ __forceinline__ void consume_pass(const WsArgs& a, const Tile& tl, uint32_t base, uint32_t full,
                                             uint32_t empty, int c, int n_k, uint32_t& it, bf16* out,
                                             const float* xsc) {
  float acc[2][kRows / 8][4];
  moe_stream::zero_acc(acc);
  uint32_t held = 0;  // bf16: the stage whose products may still be in flight
  for (int kt = 0; kt < n_k; ++kt, ++it) {
    const uint32_t s = it % kStages;
    cuda::mbar_wait(full + 8 * s, (it / kStages) & 1u);
    cuda::fence_proxy_async_shared();  // the producer's cp.async rows, written through the generic proxy
    const uint32_t st = base + s * kStageBytes;
    if constexpr (kAct8) {
      cuda::e4m3_stage<N>(st + c * kWRows * kTileK, st + kWBytes, acc);
      cuda::mbar_arrive(empty + 8 * s);
    } else {
      issue_stage_bf16<N>(st + c * kWRows * kTileK, st + kWBytes, acc);
      cuda::wgmma_wait<1>();  // the stage before is multiplied: its buffer goes back
      if (kt > 0) cuda::mbar_arrive(empty + 8 * held);
      held = s;
    }
  }
  if constexpr (!kAct8) {
    cuda::wgmma_wait<0>();
    moe_stream::fence_acc(acc);
    if (n_k > 0) cuda::mbar_arrive(empty + 8 * held);
  }
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = (static_cast<int>(threadIdx.x) >> 5) & 3;
  const TileRows rows = consumer_rows<kGated>(a.n_out, tl.ct, c);
  const int64_t e_row0 = static_cast<int64_t>(tl.e) * a.w_rows;
  float rs[2][2];  // the weight rows' scales (W8A8; 1 for bf16)
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      int64_t w;
      const bool ok = rows.row(64 * t + 16 * warp + (lane >> 2) + 8 * hh, w);
      rs[t][hh] = !ok ? 0.0f : kAct8 ? *reinterpret_cast<const float*>(a.W.p[1] + (e_row0 + w) * 4) : 1.0f;
    }
#pragma unroll
  for (int j = 0; j < N / 8; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const auto [i, col] = acc_pos(j, q, lane, warp);
      float f0 = acc[0][j][q] * rs[0][q >> 1], f1 = acc[1][j][q] * rs[1][q >> 1];
      if constexpr (kAct8) {
        f0 *= xsc[i];
        f1 *= xsc[i];
      }
      if constexpr (kGated) {  // as gelu_mul_split_cuda on the bf16 products
        const float g = cuda::rbf(f0), u = cuda::rbf(f1);
        out[i * kOutStride<kGated> + col] = __float2bfloat16_rn(cuda::rbf(cuda::gelu_tanh(g)) * u);
      } else {
        out[i * kOutStride<kGated> + col] = __float2bfloat16_rn(f0);
        out[i * kOutStride<kGated> + col + 64] = __float2bfloat16_rn(f1);
      }
    }
}

#endif  // DG_HAS_WGMMA

template <bool kGated, bool kAct8>
__global__ void __launch_bounds__(kThreads, 1) moe_ws_kernel(const __grid_constant__ WsArgs a) {
  cuda::pdl_enter();
#if DG_HAS_WGMMA
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ int32_t s_off[kMaxExperts + 1];    // the experts' offsets
  __shared__ int32_t s_tile0[kMaxExperts + 1];  // each expert's first tile; [n_exp]: the tiles in all
  __shared__ float s_xsc[kConsumers][kRows];    // each consumer's copy of the pass rows' activation scales
  __shared__ __align__(8) uint64_t s_full[kStages], s_empty[kStages];
  const int tid = static_cast<int>(threadIdx.x), wg = tid / kWgThreads;
  const int E = a.n_exp;
  const uint32_t base = (cuda::smem_u32(smem) + 1023u) & ~1023u;
  const uint32_t full = cuda::smem_u32(s_full), empty = cuda::smem_u32(s_empty);
  const int n_tiles =
      prologue<kStages>(full, empty, a.offsets, E, col_tiles<kGated>(a.n_out), kWsPassRows, s_off, s_tile0);
  constexpr int kElem = kAct8 ? 1 : 2, kStageK = kTileK / kElem, kChunkK = 16 / kElem;  // elements: stage, chunk
  const int n_k = (a.K + kStageK - 1) / kStageK;
  auto tile_at = [&](int t) { return ws_tile_at(t, s_tile0, s_off, E); };

  if (wg == kConsumers) {  // the producer
    cuda::regs_dec<kProducerRegs>();
    const int pt = tid - kConsumers * kWgThreads, chunk = pt & 7, row8 = pt >> 3;  // 16 rows x 8 chunks per sweep
    uint32_t it = 0;
    for (int t = static_cast<int>(blockIdx.x); t < n_tiles; t += static_cast<int>(gridDim.x)) {
      const Tile tl = tile_at(t);
      const int n_load = pass_rows(tl.m);
      // Consumer cc's weight rows as two TMA boxes of 64 rows: gated, its 64 gate rows and the 64 up rows of the
      // same outputs (n_out rows further); otherwise its 128 rows. Rows past a consumer's `valid` are read as they
      // lie (the next columns, or zeros past W's end): their products fall in columns that are never stored.
      static_assert(kConsumers == 2 && kWRows == 128, "two consumers of two 64-row boxes");
      int box_row[kConsumers][2];
#pragma unroll
      for (int cc = 0; cc < kConsumers; ++cc) {
        const TileRows tr = consumer_rows<kGated>(a.n_out, tl.ct, cc);
        const int row0 = static_cast<int>(static_cast<int64_t>(tl.e) * a.w_rows + tr.first);
        box_row[cc][0] = row0;
        box_row[cc][1] = kGated ? static_cast<int>(static_cast<int64_t>(tl.e) * a.w_rows + tr.second) : row0 + 64;
      }
      int32_t xrow[kRows / 16];  // the x row of each pass row this thread copies; -1: zero-filled
#pragma unroll
      for (int j = 0; j < kRows / 16; ++j) {
        const int i = row8 + 16 * j;
        xrow[j] = i < tl.m ? (a.x_rows ? a.x_rows[tl.r0 + i] / a.x_rows_div : tl.r0 + i) : -1;
      }
      for (int kt = 0; kt < n_k; ++kt, ++it) {
        const uint32_t s = it % kStages;
        if (it >= kStages) cuda::mbar_wait(empty + 8 * s, (it / kStages - 1) & 1u);
        const uint32_t st = base + s * kStageBytes, bar = full + 8 * s;
        const int k0 = kt * kStageK;
        if (pt == 0) {  // the weights: four boxes, their bytes counted on the stage's barrier
          cuda::mbar_arrive_expect_tx(bar, kWBytes);
          // Tiles: a whole stage is a box of the tiled map, a last, shorter one of the short map (zeros past K).
          const bool short_tile = a.tiled && a.K - k0 < kStageK;
#pragma unroll
          for (int cc = 0; cc < kConsumers; ++cc)
#pragma unroll
            for (int b = 0; b < 2; ++b) {
              const uint32_t dst = st + (cc * kWRows + 64 * b) * kTileK;
              if (short_tile) cuda::tma_load_3d(dst, &a.smap, 0, 0, box_row[cc][b] / 64, bar);
              else if (a.tiled) cuda::tma_load_3d(dst, &a.wmap, 0, 64 * kt, box_row[cc][b] / 64, bar);
              else cuda::tma_load_2d(dst, &a.wmap, k0, box_row[cc][b], bar);
            }
        }
        const bool k_ok = k0 + chunk * kChunkK < a.K;
        const int64_t kb = static_cast<int64_t>(k0) * kElem;  // the stage's first byte of a row
#pragma unroll
        for (int j = 0; j < kRows / 16; ++j) {
          const int i = row8 + 16 * j;
          if (i >= n_load) break;
          const bool ok = k_ok && xrow[j] >= 0;
          const uint8_t* src = ok ? a.x + static_cast<int64_t>(xrow[j]) * a.K * kElem + kb + chunk * 16 : a.x;
          cuda::cp_async16(st + kWBytes + moe_stream::swizzle<kTileK>(i, chunk), src, ok);
        }
        cuda::cp_async_mbar_arrive(bar);  // once this thread's copies of the stage have landed
      }
    }
    return;
  }

  // A consumer: warpgroup c (consume_pass: which accumulator holds what).
  cuda::regs_inc<kConsumerRegs>();
  const int c = wg, ctid = tid - c * kWgThreads;
  bf16* out = reinterpret_cast<bf16*>(smem + (base - cuda::smem_u32(smem)) + kStages * kStageBytes) +
              c * kRows * kOutStride<kGated>;
  uint32_t it = 0;
  for (int t = static_cast<int>(blockIdx.x); t < n_tiles; t += static_cast<int>(gridDim.x)) {
    const Tile tl = tile_at(t);
    {  // the pass rows' activation scales; the barrier also ends the last tile's reads of the staging rows
      const int i = ctid;
      const int src = i < tl.m ? (a.x_rows ? a.x_rows[tl.r0 + i] / a.x_rows_div : tl.r0 + i) : -1;
      s_xsc[c][i] = src < 0 ? 0.0f : kAct8 ? a.x_scale[src] : 1.0f;
      cuda::named_sync(1 + c, kWgThreads);
    }
    if (pass_rows(tl.m) == 64) consume_pass<kGated, kAct8, 64>(a, tl, base, full, empty, c, n_k, it, out, s_xsc[c]);
    else consume_pass<kGated, kAct8, 128>(a, tl, base, full, empty, c, n_k, it, out, s_xsc[c]);
    const TileRows rows = consumer_rows<kGated>(a.n_out, tl.ct, c);
    cuda::named_sync(1 + c, kWgThreads);
    moe_stream::store_staged_rows<kOutStride<kGated>, kWgThreads>(out, a.y, a.n_out, tl.r0, tl.m, rows, ctid);
  }
#else
  (void)a;
  __trap();  // the launcher refuses devices without sm_90a code
#endif
}

// The limits for W8A8 (K % 16) and bf16 (K % 8).
Status ws_limits(const std::string& name, bool act8, DType w_dtype, int64_t K, int64_t n_exp, int64_t w_rows,
                 int64_t x_rows_max) {
  return limits(name, w_dtype, act8 ? 16 : 8, act8 ? 1 : 2, K, n_exp, w_rows, x_rows_max, "--moe wide");
}

// The TMA maps of fp8 codes or bf16 weights in stage tiles (row_tiles.h), boxes of 64 rows x 128 bytes in the
// 128-byte swizzle: for each block of 64 rows (z), its whole stages as 64 rb / 128 rows of 128 bytes (y: 64 a stage;
// `last` false, rows of rb >= 128 bytes), or its last, shorter stage as 64 rows of its rb % 128 bytes (`last`; the
// box's bytes past them zeros).
Status tiled_map(const uint8_t* w, bool bf16, int64_t rb, int64_t rows, bool last, CUtensorMap& map,
                 const std::string& what) {
  const int64_t len = last ? rb % 128 : 128, elem = bf16 ? 2 : 1;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(len / elem), static_cast<cuuint64_t>(last ? 64 : rb / 128 * 64),
                              static_cast<cuuint64_t>(rows / 64)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(len), static_cast<cuuint64_t>(64 * rb)};
  if (last) w += rb / 128 * 128 * 64;
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(128 / elem), 64, 1};
  const cuuint32_t unit[3] = {1, 1, 1};
  const CUresult r = tensor_map_encoder()(&map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8,
                                          3, const_cast<uint8_t*>(w), dims, strides, box, unit,
                                          CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return Status::error(what + ": cuTensorMapEncodeTiled refused the tiled W's " + (last ? "last" : "whole") +
                         " stages (" + std::to_string(rows) + " rows of " + std::to_string(rb) + " bytes; error " +
                         std::to_string(static_cast<int>(r)) + ")");
  return Status::ok();
}

template <bool kGated>
Status launch_ws(WsArgs a, const void* W, DType w_dtype, int64_t n_exp, int64_t x_rows_max, cudaStream_t s,
                 const char* what, const MoeWsForm& form) {
  const std::string name(what);
  if (n_exp == 0 || a.n_out == 0) return Status::ok();
  const bool act8 = w_dtype == DType::kFp8 && a.x_scale != nullptr;
  const bool q4 = w_dtype == DType::kQ4 && a.x_scale == nullptr;
  if (!act8 && !q4 && !(w_dtype == DType::kBF16 && a.x_scale == nullptr))
    return Status::error(name + ": --moe ws takes fp8 weights with fp8 activations, bf16 or q4 weights with bf16 "
                                "activations, not " + std::string(dtype_name(w_dtype)) + " weights with " +
                         (a.x_scale ? "fp8" : "bf16") + " activations (use --moe wide or stream)");
  if (a.offsets == nullptr) return Status::error(name + ": --moe ws needs the experts' offsets");
  if (a.x_rows != nullptr && a.x_rows_div < 1)
    return Status::error(name + ": the row divisor must be at least 1, not " + std::to_string(a.x_rows_div));
  if (q4)
    return q4_products(kGated, a.x, a.x_rows, a.x_rows_div, x_rows_max, a.K, W, a.w_rows, a.n_out, n_exp, a.offsets,
                       a.y, s, what, form);
  a.tiled = form.layout == WeightLayout::kTiled;
  if (a.tiled && !row_tiles_ok(w_dtype, Shape{n_exp, a.w_rows, a.K}))
    return Status::error(name + ": weights in stage tiles must be fp8 or bf16 of rows a multiple of 128, not " +
                         std::string(dtype_name(w_dtype)) + " of " + std::to_string(a.w_rows) + " rows of K = " +
                         std::to_string(a.K) + " (--no-fp8-tiles, --no-bf16-tiles)");
  if (Status st = ws_limits(name, act8, w_dtype, a.K, n_exp, a.w_rows, x_rows_max); !st.is_ok()) return st;
  if (((reinterpret_cast<uintptr_t>(a.x) | reinterpret_cast<uintptr_t>(W)) & 15) != 0)
    return Status::error(name + ": x and W must be 16-byte aligned");
  a.n_exp = static_cast<int>(n_exp);
  a.W = moe_stream::weight_planes(W, w_dtype, n_exp, a.w_rows, a.K, form.layout);
  // W's rows in boxes of 64 rows x 128 bytes in the 128-byte swizzle (the layout the wgmma descriptors read), or
  // its tiles' whole stages.
  if (a.tiled) {
    const int64_t rb = a.W.row_bytes[0];
    for (const bool last : {false, true})
      if (last ? rb % kTileK != 0 : rb >= kTileK)
        if (Status st = tiled_map(a.W.p[0], !act8, rb, n_exp * a.w_rows, last, last ? a.smap : a.wmap, name);
            !st.is_ok())
          return st;
  } else if (Status st = rows_map(a.W.p[0], act8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                                  a.K, n_exp * a.w_rows, a.W.row_bytes[0], kTileK / (act8 ? 1 : 2),
                                  CU_TENSOR_MAP_SWIZZLE_128B, a.wmap, name, "W");
             !st.is_ok()) {
    return st;
  }
  auto* kernel = act8 ? moe_ws_kernel<kGated, true> : moe_ws_kernel<kGated, false>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes<kGated>);
  if (err != cudaSuccess) return cuda_status(err, what);
  cuda::launch(kernel, dim3(static_cast<unsigned>(cuda::sm_count())), kThreads, kSmemBytes<kGated>, s, a);
  return cuda_status(cudaGetLastError(), what);
}

}  // namespace

bool moe_ws_takes(bool act8, int64_t K, int64_t n_exp, int64_t w_rows, int64_t x_rows_max) {
  return ws_limits("", act8, act8 ? DType::kFp8 : DType::kBF16, K, n_exp, w_rows, x_rows_max).is_ok();
}

Status moe_ws_gemm_cuda(const void* x, const float* x_scale, const int32_t* x_rows, int x_rows_div,
                        int64_t x_rows_max, int64_t K, const void* W, DType w_dtype, int64_t N, int64_t n_exp,
                        const int32_t* offsets, void* y, cudaStream_t s, const MoeWsForm& form) {
  const WsArgs a{{}, {}, false, static_cast<const uint8_t*>(x), x_scale, x_rows, x_rows_div, static_cast<int>(K), {},
                 N, N, offsets, 0, static_cast<bf16*>(y)};
  return launch_ws<false>(a, W, w_dtype, n_exp, x_rows_max, s, "moe_ws_gemm_cuda", form);
}

Status moe_ws_gate_up_cuda(const void* x, const float* x_scale, const int32_t* x_rows, int x_rows_div,
                           int64_t x_rows_max, int64_t K, const void* gate_up, DType w_dtype, int64_t ff,
                           int64_t n_exp, const int32_t* offsets, void* out, cudaStream_t s, const MoeWsForm& form) {
  const WsArgs a{{}, {}, false, static_cast<const uint8_t*>(x), x_scale, x_rows, x_rows_div, static_cast<int>(K), {},
                 2 * ff, ff, offsets, 0, static_cast<bf16*>(out)};
  return launch_ws<true>(a, gate_up, w_dtype, n_exp, x_rows_max, s, "moe_ws_gate_up_cuda", form);
}

}  // namespace dg
