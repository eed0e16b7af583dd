// Streaming grouped GEMMs for the MoE experts at few routed rows per expert (bandwidth-bound): one CTA per
// (expert, col_tiles consecutive tiles of output columns) streams its slice of the expert's weights once through a
// multi-stage cp.async pipeline and applies it to all of the expert's rows with mma.sync, as the swapped product
// y^T = W x^T (weight rows are the MMA's M, routed rows its n8). Row counts are read from the device offsets: no
// host synchronisation. fp8 weights can take fp8 activations (W8A8: e4m3 products, both scales in the epilogue).
// Design and parameters: docs/CUDA.md ("The streaming MoE kernel"), docs/EXPERTS.md ("Column tiles a CTA"); a
// stage's products: moe_stream_stage.cuh.
// Oracle: moe_experts_cpu.
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/mma.cuh"
#include "core/cuda/wgmma.cuh"
#include "core/cuda/launch.cuh"
#include "core/packed_layout.h"
#include "ops/moe/moe_cuda.h"
#include "ops/moe/moe_stream_formats.cuh"
#include "ops/moe/moe_stream_q4.cuh"
#include "ops/moe/moe_stream_stage.cuh"
#include "ops/moe/q4_layout.h"
#include "ops/moe/row_tiles.h"

namespace dg {
namespace {

using namespace moe_stream;

struct StreamArgs {
  const uint8_t* x;        // activation rows [*, K]: bf16, or E4M3 codes when x_scale is set (Fmt::kAct8)
  const float* x_scale;    // kAct8: the f32 scale of each x row (indexed like x's rows); null otherwise
  const int32_t* x_rows;   // sorted position i -> x row x_rows[i] / x_rows_div; null: x row i
  int x_rows_div;
  int K;
  Planes W;                // [n_exp, w_rows, K] in the weight format
  int64_t w_rows;
  int64_t n_out;           // output columns: w_rows, or ff = w_rows / 2 in the gated form
  const int32_t* offsets;  // [n_exp + 1]; null: one weight matrix shared by row blocks e of Fmt::kRowCap rows
  int64_t dense_rows;      // rows of x and y when offsets is null
  bf16* y;                 // [pairs, n_out], row i = sorted position i
  int col_tiles;           // consecutive column tiles a CTA streams, one pipeline across them (>= 1)
};

// The formats with a body for several column tiles a CTA (kMulti): W8A8 in passes of 64 rows (the down product's
// default) and bf16 (its A/B). Each tile's staged output rows must fit one stage's buffer (the passes of 128 rows'
// do not).
template <class Fmt>
constexpr bool kMultiBody = Fmt::kRowCap * (kTileN + 8) * 2 <= kStageBytes<Fmt> &&
                            (Fmt::kAct8 || std::is_same_v<Fmt, WeightBf16>);

// The rows a pass of m routed rows loads and multiplies: m rounded up to whole n8 pairs, and for the 128-row
// passes, 65-128 rows to all 128 (wgmma n128; the shapes between are not instantiated).
template <class Fmt> __device__ __forceinline__ int pass_rows(int m) {
  const int rows = (m + 15) & ~15;
  if constexpr (Fmt::kRowCap == 128) return rows > 64 ? 128 : rows;
  return rows;
}

// kMulti: several column tiles a CTA (col_tiles > 1), each tile's epilogue inside the stage loop; otherwise one
// tile and its epilogue after the loop (a body of its own: the epilogue in the loop made ptxas serialise the gated
// W8A8 body's wgmma products, C7511).
template <class Fmt, bool kGated, bool kMulti = false>
__global__ void __launch_bounds__(kThreads, Fmt::kMinBlocks) moe_stream_kernel(StreamArgs a) {
  cuda::pdl_enter();  // before any load, weights included: the q4 upload relayouts weights in place on the stream
  extern __shared__ __align__(128) uint8_t smem[];
  constexpr int kRowCap = Fmt::kRowCap;
  __shared__ int64_t x_off[kRowCap];  // element offset of each pass row in x; -1: padding (zero-filled)
  __shared__ float x_sc[kRowCap];     // kAct8: each pass row's activation scale
  const int e = static_cast<int>(blockIdx.y);
  constexpr int kOutCols = kGated ? kTileN / 2 : kTileN;
  constexpr int kOutStride = kOutCols + 8;  // bf16 staging rows, padded against bank conflicts
  constexpr int kSplit = kGated ? kTileN / 2 : kTileN;
  // The CTA's column tiles tile0 .. tile0 + n_t - 1 run as one stream of n_t * n_k stages: a tile's first stages
  // are copied while the one before is multiplied, and its epilogue runs while the next tile's stages land.
  const int tile0 = static_cast<int>(blockIdx.x) * (kMulti ? a.col_tiles : 1);
  const int n_tiles = static_cast<int>((a.n_out + kOutCols - 1) / kOutCols);
  const int n_t = !kMulti ? 1 : n_tiles - tile0 < a.col_tiles ? n_tiles - tile0 : a.col_tiles;
  auto tile_rows = [&](int t) {
    const int64_t col0 = static_cast<int64_t>(tile0 + t) * kOutCols;
    return TileRows{col0, kGated ? a.n_out + col0 : 0, kSplit,
                    static_cast<int>(a.n_out - col0 < kOutCols ? a.n_out - col0 : kOutCols)};
  };
  // One tile's rows computed once (the 128-row passes) or at each use (the others): each the form in which ptxas
  // does not serialise the gated W8A8 body's wgmma products (C7511), found by compiling both.
  constexpr bool kRows0Once = Fmt::kRowCap == 128;
  const TileRows rows0 = tile_rows(0);
  const int mat = a.offsets ? e : 0;  // which weight matrix
  const int64_t e_row0 = static_cast<int64_t>(mat) * a.w_rows;
  const uint64_t policy = cuda::l2_evict_first();
  const uint32_t base = Fmt::kWgmma ? (cuda::smem_u32(smem) + 1023u) & ~1023u : cuda::smem_u32(smem);
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  constexpr int kTileK = Fmt::kTileK, kStages = Fmt::kStages, kChunks = kXRowBytes<Fmt> / 16;
  constexpr int kChunkElems = 16 / kXElem<Fmt>;
  const int n_k = (a.K + kTileK - 1) / kTileK, n_s = n_t * n_k;  // stage s: tile s / n_k at k (s % n_k) kTileK
  auto stage_addr = [base](int s) { return base + static_cast<uint32_t>((s % kStages) * kStageBytes<Fmt>); };
  typename Fmt::Loader wl;  // this thread's weight copies, resolved once a tile
  int wl_tile = 0;
  wl.init(StageSrc{&a.W, e_row0, a.K, tile_rows(0), 0});
  auto load_w = [&](int s) {  // stages are issued in order within a pass: the loader moves on at a tile's first
    if constexpr (!kMulti) {
      wl.load(stage_addr(s), s * kTileK, a.K, policy);
      return;
    }
    const int t = s / n_k;
    if (t != wl_tile) {
      wl.init(StageSrc{&a.W, e_row0, a.K, tile_rows(t), 0});
      wl_tile = t;
    }
    wl.load(stage_addr(s), (s - t * n_k) * kTileK, a.K, policy);
  };
  // The first pass's weight stages do not depend on the expert's rows: they go out before the offsets are read (a
  // dependent global load, then the row map's), and join the commit groups of their stages below.
  for (int s = 0; s < kStages - 1 && s < n_s; ++s) load_w(s);
  const int r0 = a.offsets ? a.offsets[e] : e * kRowCap;
  const int r1 = a.offsets ? a.offsets[e + 1]
                            : static_cast<int>(a.dense_rows - r0 < kRowCap ? a.dense_rows : r0 + kRowCap);
  if (r0 >= r1) {
    cuda::cp_async_wait<0>();
    return;
  }
  // This thread's activation copies: chunk xc of pass rows tid / kChunks + it * kXRowStep.
  static_assert(kThreads % kChunks == 0, "a thread keeps one activation chunk column");
  constexpr int kXRowStep = kThreads / kChunks, kXLoads = (kRowCap + kXRowStep - 1) / kXRowStep;
  const int xc = tid % kChunks, xr0 = tid / kChunks;

  for (int p0 = r0; p0 < r1; p0 += kRowCap) {
    const int m = r1 - p0 < kRowCap ? r1 - p0 : kRowCap;
    const int m_load = pass_rows<Fmt>(m);  // rows past m up to it are zero-filled
    const int n_pairs = m_load / 16;
    for (int i = tid; i < kRowCap; i += kThreads) {
      const int64_t src = i < m ? (a.x_rows ? a.x_rows[p0 + i] / a.x_rows_div : p0 + i) : -1;
      x_off[i] = src >= 0 ? src * a.K : -1;
      if constexpr (Fmt::kAct8) x_sc[i] = src >= 0 ? a.x_scale[src] : 0.0f;
    }
    __syncthreads();
    const uint8_t* xsrc[kXLoads];  // row xr0 + it * kXRowStep's chunk xc at k = 0; null: zero-filled
#pragma unroll
    for (int it = 0; it < kXLoads; ++it) {
      const int i = xr0 + it * kXRowStep;
      const int64_t off = i < m_load ? x_off[i] : -1;
      xsrc[it] = off >= 0 ? a.x + (off + xc * kChunkElems) * kXElem<Fmt> : nullptr;
    }

    auto load = [&](int s, bool weights) {
      const uint32_t xs = stage_addr(s) + Fmt::kStageBytes;
      const int k0 = s % n_k * kTileK;
      if (weights) load_w(s);
      const bool k_ok = k0 + xc * kChunkElems < a.K;
#pragma unroll
      for (int it = 0; it < kXLoads; ++it) {
        const int i = xr0 + it * kXRowStep;
        if (i >= m_load) break;
        const bool ok = k_ok && xsrc[it] != nullptr;
        cuda::cp_async16(xs + x_chunk<Fmt>(i, xc), ok ? xsrc[it] + k0 * kXElem<Fmt> : a.x, ok);
      }
    };

    float acc[2][kRowCap / 8][4];
    zero_acc(acc);

    // A tile's epilogue, staged from `at`: accumulator element q of n8 tile j is weight row (lane / 4) + 8 (q / 2)
    // of the m16 tile, routed row 8 j + 2 (lane % 4) + q % 2, staged through shared memory as [row][column] for
    // coalesced stores, with the format's per-row factor (fp8/q8 row scales, nvfp4's expert scale) of this lane's
    // four weight rows.
    auto epilogue = [&](const TileRows& rows, uint32_t at) {
      float rs[2][2];
#pragma unroll
      for (int t = 0; t < 2; ++t)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          int64_t wr;
          const bool ok = rows.row(16 * warp + (lane >> 2) + 8 * hh + t * (kTileN / 2), wr);
          rs[t][hh] = ok ? Fmt::row_scale(a.W, mat, e_row0 + wr) : 0.0f;
        }
      bf16* out = reinterpret_cast<bf16*>(smem + (at - cuda::smem_u32(smem)));
#pragma unroll
      for (int j = 0; j < kRowCap / 8; ++j) {
        if (j >= 2 * n_pairs) break;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int i = 8 * j + 2 * (lane & 3) + (q & 1);
          const int c = 16 * warp + (lane >> 2) + 8 * (q >> 1);
          float f0 = acc[0][j][q] * rs[0][q >> 1], f1 = acc[1][j][q] * rs[1][q >> 1];
          if constexpr (Fmt::kAct8) {
            f0 *= x_sc[i];
            f1 *= x_sc[i];
          }
          if constexpr (kGated) {  // as gelu_mul_split_cuda on the bf16 products
            const float g = cuda::rbf(f0), u = cuda::rbf(f1);
            out[i * kOutStride + c] = __float2bfloat16_rn(cuda::rbf(cuda::gelu_tanh(g)) * u);
          } else {
            out[i * kOutStride + c] = __float2bfloat16_rn(f0);
            out[i * kOutStride + c + kTileN / 2] = __float2bfloat16_rn(f1);
          }
        }
      }
      __syncthreads();
      store_staged_rows<kOutStride, kThreads>(out, a.y, a.n_out, p0, m, rows, tid);
    };

    for (int s = 0; s < kStages - 1; ++s) {
      if (s < n_s) load(s, p0 != r0);  // the first pass's weights are in flight already
      cuda::cp_async_commit();
    }
    for (int s = 0; s < n_s; ++s) {
      cuda::cp_async_wait<kStages - 2>();  // stage s has landed
#if DG_HAS_WGMMA
      if constexpr (Fmt::kWgmma) cuda::fence_proxy_async_shared();  // ... where wgmma reads it
#endif
      __syncthreads();                     // ... for every thread, and all warps are done with stage s - 1
      if (s + kStages - 1 < n_s) load(s + kStages - 1, true);  // into stage s - 1's buffer
      cuda::cp_async_commit();
      const int t = kMulti ? s / n_k : 0, kt = s - t * n_k;
      const TileRows rows_t = kMulti || !kRows0Once ? tile_rows(t) : rows0;
      stage_mma<Fmt>(stage_addr(s), StageSrc{&a.W, e_row0, a.K, rows_t, kt * kTileK}, warp, lane, n_pairs, acc);
      if constexpr (kMulti) {
        // Each tile's epilogue staged in stage s's buffer while the next tile's copies land in the others; after
        // the pass's last stage, when no copies are in flight, from the first buffer on.
        if (kt + 1 == n_k) {
          __syncthreads();  // every warp is done with the stage's buffer
          epilogue(tile_rows(t), s + 1 < n_s ? stage_addr(s) : base);
          zero_acc(acc);  // the buffer is next written after the next stage's barrier
        }
      }
    }
    cuda::cp_async_wait<0>();
    __syncthreads();
    if constexpr (!kMulti) {
      epilogue(kRows0Once ? rows0 : tile_rows(0), base);
      __syncthreads();  // the staging area and x_off are reused by the next pass
    }
  }
}

// n_exp: the experts (offsets set), or 1 for one matrix over row blocks of Fmt::kRowCap rows.
template <class Fmt, bool kGated>
Status launch(const StreamArgs& a, int64_t n_exp, cudaStream_t s, const char* what) {
  static_assert(Fmt::kRowCap * (kTileN + 8) * 2 <= Fmt::kStages * kStageBytes<Fmt>,
                "the output staging fits in the pipeline buffers");
  if (a.col_tiles < 1 || (a.col_tiles > 1 && !kMultiBody<Fmt>))
    return Status::error(std::string(what) + ": " + std::to_string(a.col_tiles) + " column tiles a CTA; this "
                         "format's passes take " + (kMultiBody<Fmt> ? "1 or more" : "1 (several are W8A8's and bf16's "
                         "passes of 64 rows)"));
  static_assert(Fmt::kRowCap % 16 == 0 && Fmt::kRowCap <= kMaxRowCap, "passes of whole n8 pairs");
  const int64_t blocks = a.offsets ? n_exp : (a.dense_rows + Fmt::kRowCap - 1) / Fmt::kRowCap;
  if (blocks > 65535)
    return Status::error(std::string(what) + ": " + std::to_string(blocks) + " row blocks exceed 65535");
  constexpr int kOutCols = kGated ? kTileN / 2 : kTileN;
  auto* kernel = moe_stream_kernel<Fmt, kGated>;
  if constexpr (kMultiBody<Fmt>)
    if (a.col_tiles > 1) kernel = moe_stream_kernel<Fmt, kGated, true>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes<Fmt>);
  if (err != cudaSuccess) return cuda_status(err, what);
  const int64_t tiles = (a.n_out + kOutCols - 1) / kOutCols;
  const dim3 grid(static_cast<unsigned>((tiles + a.col_tiles - 1) / a.col_tiles), static_cast<unsigned>(blocks));
  cuda::launch(kernel, grid, kThreads, kSmemBytes<Fmt>, s, a);
  return cuda_status(cudaGetLastError(), what);
}

}  // namespace

Planes moe_stream::weight_planes(const void* W, DType fmt, int64_t n_exp, int64_t w_rows, int64_t K,
                                 WeightLayout layout) {
  Planes p{};
  const auto* base = static_cast<const uint8_t*>(W);
  p.tiled = (fmt == DType::kFp8 || fmt == DType::kBF16) && layout == WeightLayout::kTiled;
  if (fmt == DType::kBF16) {
    p.p[0] = base;
    p.row_bytes[0] = 2 * K;
    p.limit[0] = 2 * K * w_rows * n_exp;
    return p;
  }
  const PackedLayout L = packed_layout(fmt, Shape{n_exp, w_rows, K});
  for (int i = 0; i < L.n_planes; ++i) {
    p.p[i] = base + L.offset[i];
    p.row_bytes[i] = L.row_bytes[i];
    p.limit[i] = (i + 1 < L.n_planes ? L.offset[i + 1] : L.total) - L.offset[i];
  }
  if (fmt == DType::kQ4 && layout == WeightLayout::kKernel) {
    const Shape s{n_exp, w_rows, K};
    p.p[2] = base + q4_kernel_factor_offset(s);
    p.row_bytes[2] = 0;
    p.limit[2] = q4_kernel_layout_bytes(s) - q4_kernel_factor_offset(s);
  }
  return p;
}

namespace {

template <class Fmt, bool kGated>
Status launch_checked(StreamArgs a, const void* W, DType fmt, int64_t n_exp, cudaStream_t s, const char* what,
                      WeightLayout layout = WeightLayout::kDisk) {
  if (a.K % Fmt::kKAlign != 0)
    return Status::error(std::string(what) + ": K = " + std::to_string(a.K) + " must be a multiple of " +
                         std::to_string(Fmt::kKAlign) + " for " + std::string(dtype_name(fmt)) + " weights");
  a.W = weight_planes(W, fmt, a.offsets ? n_exp : 1, a.w_rows, a.K, layout);
  return launch<Fmt, kGated>(a, n_exp, s, what);
}

// Whether the current device runs the e4m3 tensor-core products (compute capability 8.9 and later).
bool device_has_fp8_mma() {
  int dev = 0, major = 0, minor = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  return major * 10 + minor >= 89;
}

template <bool kGated>
Status stream_gemm(StreamArgs a, const void* W, DType w_dtype, int64_t n_exp, cudaStream_t s, const char* what,
                   int stages = 0, WeightLayout layout = WeightLayout::kDisk, bool wide = false) {
  auto misaligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) != 0; };
  if (n_exp == 0 || a.n_out == 0) return Status::ok();
  if (a.K <= 0 || a.K % 8 != 0) return Status::error(std::string(what) + ": K must be a positive multiple of 8");
  if (misaligned(a.x) || misaligned(W)) return Status::error(std::string(what) + ": x and W must be 16-byte aligned");
  if (n_exp > 65535 || a.x_rows_div < 1) return Status::error(std::string(what) + ": bad expert count or row divisor");
  if (layout == WeightLayout::kTiled && w_dtype != DType::kFp8 && w_dtype != DType::kBF16)
    return Status::error(std::string(what) + ": " + std::string(dtype_name(w_dtype)) + " weights in stage tiles; the "
                         "streaming kernel reads tiles of fp8 and bf16 weights only (q4's are --moe ws's; "
                         "--no-q4-tiles)");
  if (layout == WeightLayout::kTiled && !row_tiles_ok(w_dtype, Shape{a.offsets ? n_exp : 1, a.w_rows, a.K}))
    return Status::error(std::string(what) + ": " + std::string(dtype_name(w_dtype)) + " weights of " +
                         std::to_string(a.w_rows) + " rows of K = " + std::to_string(a.K) +
                         " cannot be in stage tiles (rows a multiple of 128; --no-fp8-tiles, --no-bf16-tiles)");
  if (wide) {  // 128 routed rows per pass (--moe wide): bf16, and W8A8 on Hopper
    if (w_dtype == DType::kBF16 && a.x_scale == nullptr)
      return launch_checked<WeightBf16Wide, kGated>(a, W, w_dtype, n_exp, s, what, layout);
    static const bool fp8_mma = device_has_fp8_mma();
    if (w_dtype == DType::kFp8 && a.x_scale != nullptr && fp8_mma)
      return launch_checked<WeightFp8Act8Wide, kGated>(a, W, w_dtype, n_exp, s, what, layout);
    return Status::error(std::string(what) + ": passes of 128 rows (--moe wide) take bf16 weights and activations "
                                             "or fp8 weights with fp8 activations (compute capability 8.9+), not " +
                         std::string(dtype_name(w_dtype)) + (a.x_scale != nullptr ? " with fp8 activations" : "") +
                         " (use --moe stream)");
  }
  if (a.x_scale != nullptr) {  // fp8 activations (W8A8)
    if (w_dtype != DType::kFp8)
      return Status::error(std::string(what) + ": fp8 activations need fp8 weights, not " +
                           std::string(dtype_name(w_dtype)) + " (use --expert-act bf16)");
    static const bool fp8_mma = device_has_fp8_mma();
    if (!fp8_mma)
      return Status::error(std::string(what) + ": fp8 activations need a GPU of compute capability 8.9 or later "
                                               "(Ada, Hopper); use --expert-act bf16");
    if (stages == 3 || stages == 0)
      return launch_checked<WeightFp8Act8<3>, kGated>(a, W, w_dtype, n_exp, s, what, layout);
    if (stages == 4) return launch_checked<WeightFp8Act8<4>, kGated>(a, W, w_dtype, n_exp, s, what, layout);
    return Status::error(std::string(what) + ": fp8-activation pipelines have 3 or 4 stages, not " +
                         std::to_string(stages));
  }
  if (w_dtype == DType::kQ4 && layout == WeightLayout::kKernel) {
    switch (stages) {
      case 0: case 2: return launch_checked<WeightQ4Kernel<2>, kGated>(a, W, w_dtype, n_exp, s, what, layout);
      case 3: return launch_checked<WeightQ4Kernel<3>, kGated>(a, W, w_dtype, n_exp, s, what, layout);
      case 4: return launch_checked<WeightQ4Kernel<4>, kGated>(a, W, w_dtype, n_exp, s, what, layout);
      default:
        return Status::error(std::string(what) + ": q4 pipelines have 2, 3 or 4 stages, not " +
                             std::to_string(stages));
    }
  }
  switch (w_dtype) {
    case DType::kBF16: return launch_checked<WeightBf16, kGated>(a, W, w_dtype, n_exp, s, what, layout);
    case DType::kQ4: return launch_checked<WeightQ4, kGated>(a, W, w_dtype, n_exp, s, what);
    case DType::kFp8: return launch_checked<WeightFp8, kGated>(a, W, w_dtype, n_exp, s, what, layout);
    case DType::kNvFp4: return launch_checked<WeightNvFp4, kGated>(a, W, w_dtype, n_exp, s, what);
    case DType::kQ8: return launch_checked<WeightQ8, kGated>(a, W, w_dtype, n_exp, s, what);
    default: return Status::error(std::string(what) + ": weight format " + std::string(dtype_name(w_dtype)) +
                                  " has no streaming kernel (bf16, q4, fp8, nvfp4 and q8 do)");
  }
}

}  // namespace

bool moe_stream_supports(DType w_dtype) {
  switch (w_dtype) {
    case DType::kBF16: case DType::kQ4: case DType::kFp8: case DType::kNvFp4: case DType::kQ8: return true;
    default: return false;
  }
}

Status moe_stream_gemm_cuda(const void* x, const int32_t* x_rows, int x_rows_div, int64_t K, const void* W,
                            DType w_dtype, int64_t N, int64_t n_exp, const int32_t* offsets, void* y,
                            cudaStream_t s, const float* x_scale, int stages, WeightLayout layout, bool wide,
                            int col_tiles) {
  const StreamArgs a{static_cast<const uint8_t*>(x), x_scale, x_rows, x_rows_div, static_cast<int>(K), {}, N, N,
                     offsets, 0, static_cast<bf16*>(y), col_tiles};
  return stream_gemm<false>(a, W, w_dtype, n_exp, s, "moe_stream_gemm_cuda", stages, layout, wide);
}

Status stream_linear_cuda(const void* x, int64_t rows, int64_t K, const void* W, DType w_dtype, int64_t N, void* y,
                          cudaStream_t s, WeightLayout layout, const float* x_scale, bool wide) {
  if (rows == 0) return Status::ok();
  const StreamArgs a{static_cast<const uint8_t*>(x), x_scale, nullptr, 1, static_cast<int>(K), {}, N, N, nullptr,
                     rows, static_cast<bf16*>(y), 1};
  return stream_gemm<false>(a, W, w_dtype, 1, s, "stream_linear_cuda", 0, layout, wide);
}

Status moe_stream_gate_up_cuda(const void* x, const int32_t* x_rows, int x_rows_div, int64_t K, const void* gate_up,
                               DType w_dtype, int64_t ff, int64_t n_exp, const int32_t* offsets, void* out,
                               cudaStream_t s, const float* x_scale, int stages, WeightLayout layout, bool wide,
                               int col_tiles) {
  const StreamArgs a{static_cast<const uint8_t*>(x), x_scale, x_rows, x_rows_div, static_cast<int>(K), {}, 2 * ff,
                     ff, offsets, 0, static_cast<bf16*>(out), col_tiles};
  return stream_gemm<true>(a, gate_up, w_dtype, n_exp, s, "moe_stream_gate_up_cuda", stages, layout, wide);
}

}  // namespace dg
