// What the warp-specialised expert kernels share (moe_ws.cu: W8A8 and bf16; moe_ws_q4.cu: q4 in the kernel layout):
// one CTA an SM of two consumer warpgroups on 128 weight rows each and a producer warpgroup; the experts' first tiles
// scanned into shared memory; a consumer's weight rows in a column tile; the limits they run within (sm_90a code,
// TMA's tensor-map encoder) and their weights' TMA maps.
// Design: docs/EXPERTS.md ("The warp-specialised expert kernel").
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/cuda/cuda_common.cuh"
#include "core/cuda/mbarrier.cuh"
#include "core/cuda/tma_map.h"
#include "core/status.h"
#include "ops/moe/moe_cuda.h"
#include "ops/moe/moe_stream_formats.cuh"
#include "ops/moe/moe_ws_tiles.h"

namespace dg::moe_ws {

using cuda::bf16;
using cuda::device_is_sm90;
using cuda::rows_map;
using cuda::tensor_map_encoder;
using moe_stream::TileRows;

constexpr int kConsumers = 2;
constexpr int kWgThreads = 128;
constexpr int kThreads = (kConsumers + 1) * kWgThreads;  // consumers are warpgroups 0 and 1, the producer 2
constexpr int kWRows = 128;                              // weight rows per consumer: two m64 tiles
constexpr int kMaxExperts = 1024;
template <bool kGated> constexpr int kOutCols = kGated ? kWRows / 2 : kWRows;  // a consumer's output columns
template <bool kGated> constexpr int kOutStride = kOutCols<kGated> + 8;       // bf16 staging rows, padded
// The static shared memory of the tables: the experts' offsets and first tiles.
constexpr int kTableBytes = 2 * (kMaxExperts + 1) * 4;

// The weight rows of consumer c in column tile ct: gated, 64 gate rows then the 64 up rows of the same outputs
// (n_out rows further).
template <bool kGated> __device__ __forceinline__ TileRows consumer_rows(int64_t n_out, int ct, int c) {
  const int64_t col = static_cast<int64_t>(ct) * kConsumers * kOutCols<kGated> + c * kOutCols<kGated>;
  const int64_t left = n_out - col;
  const int valid = static_cast<int>(left < 0 ? 0 : left < kOutCols<kGated> ? left : kOutCols<kGated>);
  return kGated ? TileRows{col, n_out + col, kWRows / 2, valid} : TileRows{col, 0, kWRows, valid};
}

// Where accumulator element q of n8 tile j of warp `warp`'s share of an m64 tile lies: routed row i, weight row (the
// output column of a plain product) col of the tile's 64.
struct AccPos {
  int i, col;
};
__device__ __forceinline__ AccPos acc_pos(int j, int q, int lane, int warp) {
  return {8 * j + 2 * (lane & 3) + (q & 1), 16 * warp + (lane >> 2) + 8 * (q >> 1)};
}

// The experts' offsets into s_off[0 .. E] and their first tiles (passes of `pass` rows times n_ct column tiles)
// into s_tile0 (s_tile0[E]: the tiles in all), by every thread of the CTA; a __syncthreads before and after.
__device__ __forceinline__ void scan_tiles(const int32_t* offsets, int E, int n_ct, int pass, int32_t* s_off,
                                           int32_t* s_tile0) {
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31;
  for (int i = tid; i <= E; i += static_cast<int>(blockDim.x)) s_off[i] = offsets[i];
  __syncthreads();
  if (tid < 32) {  // a scan over the warp, lane l owning experts l * per ..
    const int per = (E + 31) / 32;
    auto tiles = [&](int e) { return ws_expert_tiles(s_off[e + 1] - s_off[e], n_ct, pass); };
    int own = 0;
    for (int k = 0; k < per; ++k)
      if (const int e = lane * per + k; e < E) own += tiles(e);
    int incl = own;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int v = __shfl_up_sync(0xffffffffu, incl, d);
      if (lane >= d) incl += v;
    }
    int run = incl - own;
    for (int k = 0; k < per; ++k)
      if (const int e = lane * per + k; e < E) {
        s_tile0[e] = run;
        run += tiles(e);
      }
    if (lane == 31) s_tile0[E] = incl;
  }
  __syncthreads();
}

// The column tiles of a product of n_out output columns (a CTA's two consumers' columns a tile).
template <bool kGated> __host__ __device__ constexpr int col_tiles(int64_t n_out) {
  return static_cast<int>((n_out + kConsumers * kOutCols<kGated> - 1) / (kConsumers * kOutCols<kGated>));
}

#if DG_HAS_WGMMA
// The kernels' prologue: kStages pairs of stage barriers at shared addresses full and empty (full: the producer's
// threads' copies and its TMA thread's expected bytes; empty: every consumer thread, consumer_threads of them), then
// scan_tiles. Returns the tiles of the call.
template <int kStages>
__device__ __forceinline__ int prologue(uint32_t full, uint32_t empty, const int32_t* offsets, int E, int n_ct,
                                        int pass, int32_t* s_off, int32_t* s_tile0,
                                        int consumer_threads = kConsumers * kWgThreads) {
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < kStages) {
    cuda::mbar_init(full + 8 * tid, kWgThreads + 1);
    cuda::mbar_init(empty + 8 * tid, consumer_threads);
  }
  cuda::mbar_init_fence();
  scan_tiles(offsets, E, n_ct, pass, s_off, s_tile0);
  return s_tile0[E];
}
#endif

// The limits of the kernels that do not depend on the pointers: K a positive multiple of `align`, at most
// kMaxExperts experts, the activation rows' bytes (x_elem a element) under 2^31 (the kernels' row offsets), the weight
// rows within int32 with a tile's margin, a device and driver that run them. Otherwise an error naming `name`, the
// weight format and `way_out` (the --moe choice that takes the shape); moe_ws_takes and moe_ws_q4_takes ask the same
// for --moe auto.
inline Status limits(const std::string& name, DType w_dtype, int align, int x_elem, int64_t K, int64_t n_exp,
                     int64_t w_rows, int64_t x_rows_max, const std::string& way_out) {
  if (K <= 0 || K % align != 0)
    return Status::error(name + ": K = " + std::to_string(K) + " must be a positive multiple of " +
                         std::to_string(align) + " for --moe ws with " + std::string(dtype_name(w_dtype)) +
                         " weights");
  if (n_exp > kMaxExperts)
    return Status::error(name + ": " + std::to_string(n_exp) + " experts; --moe ws takes at most " +
                         std::to_string(kMaxExperts) + " (use " + way_out + ")");
  if (x_rows_max * K * x_elem >= (int64_t{1} << 31))
    return Status::error(name + ": " + std::to_string(x_rows_max) + " activation rows of " + std::to_string(K) +
                         " elements pass 2^31 bytes, --moe ws's row offsets (use " + way_out + ")");
  if (n_exp * w_rows + 256 > 0x7fffffff) return Status::error(name + ": too many weight rows for --moe ws");
  static const bool sm90 = device_is_sm90();
  if (!sm90)
    return Status::error(name + ": --moe ws needs a GPU of compute capability 9.0 (Hopper; its sm_90a code); use "
                                "--moe wide or stream");
  if (tensor_map_encoder() == nullptr)
    return Status::error(name + ": the driver has no cuTensorMapEncodeTiled (TMA), which --moe ws needs; use --moe "
                                "wide or stream");
  return Status::ok();
}

// q4 weights in the kernel layout times bf16 activations (moe_ws_q4.cu), for moe_ws_gemm_cuda (gated false) and
// moe_ws_gate_up_cuda (gated: n_out = ff), run as `form` says; the caller has checked the
// offsets, the row divisor and empty calls.
Status q4_products(bool gated, const void* x, const int32_t* x_rows, int x_rows_div, int64_t x_rows_max, int64_t K,
                   const void* W, int64_t w_rows, int64_t n_out, int64_t n_exp, const int32_t* offsets, void* y,
                   cudaStream_t s, const char* what, const MoeWsForm& form);

}  // namespace dg::moe_ws
