// Streaming grouped GEMMs for the MoE experts at few routed rows per expert (bandwidth-bound): one CTA per
// (expert, tile of output columns) streams its slice of the expert's weights once through a multi-stage cp.async
// pipeline and applies it to all of the expert's rows with mma.sync, as the swapped product y^T = W x^T (weight rows
// are the MMA's M, routed rows its n8). Row counts are read from the device offsets: no host synchronisation.
// Design and parameters: docs/CUDA.md ("The streaming MoE kernel"). Oracle: moe_experts_cpu.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/mma.cuh"
#include "ops/moe/moe.h"

namespace dg {
namespace {

using cuda::bf16;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTileN = 32 * kWarps;  // weight rows per CTA: each warp owns two m16 tiles, rows 16w and 16w + kTileN/2
constexpr int kTileK = 64;           // K elements per pipeline stage: 128 bytes of each bf16 weight row
constexpr int kChunks = kTileK / 8;  // 16-byte chunks per tile row
constexpr int kStages = 4;
constexpr int kRowCap = 64;  // routed rows per pass over the weights; an expert with more rows takes more passes
static_assert(kChunks == 8, "the swizzle permutes 8 chunks per row");

// Byte offset of 16-byte chunk c of row r in a stage buffer of kTileK-element rows: chunks XOR-swizzled by r % 8,
// so the 8 row addresses of an ldmatrix fall in distinct banks.
__device__ __forceinline__ uint32_t swizzle(int r, int c) {
  return static_cast<uint32_t>(r * (kTileK * 2) + ((c ^ (r & 7)) << 4));
}

// Which weight rows the CTA's kTileN tile rows are: [0, split) -> first + r, [split, kTileN) -> second + r - split.
// A row whose index within its part is >= valid lies outside W: zero-filled, never stored.
struct TileRows {
  int64_t first, second;
  int split, valid;
  __device__ bool row(int r, int64_t& w) const {
    const int part = r < split ? r : r - split;
    w = (r < split ? first : second) + part;
    return part < valid;
  }
};

// A weight format: where an expert's weights start, how one stage of the [kTileN, kTileK] tile lands in shared
// memory, and how a warp builds an m16k16 A fragment from it. Quantised formats dequantise in load_a.
struct WeightBf16 {
  static constexpr int kStageBytes = kTileN * kTileK * 2;
  __device__ static const void* expert(const void* W, int64_t e, int64_t rows, int K) {
    return static_cast<const bf16*>(W) + e * rows * K;
  }
  __device__ static void load_stage(uint32_t dst, const void* w, int K, const TileRows& rows, int k0,
                                    uint64_t policy) {
    const auto* wp = static_cast<const bf16*>(w);
    static_assert(kTileN * kChunks % kThreads == 0);
#pragma unroll
    for (int it = 0; it < kTileN * kChunks / kThreads; ++it) {
      const int id = it * kThreads + static_cast<int>(threadIdx.x);
      const int r = id / kChunks, c = id % kChunks, k = k0 + c * 8;
      int64_t wr;
      const bool ok = rows.row(r, wr) && k < K;
      cuda::cp_async16(dst + swizzle(r, c), ok ? wp + wr * K + k : wp, ok, policy);
    }
  }
  // Rows row0 .. row0 + 15, k kk .. kk + 15 of the stage, in mma.sync's A order.
  __device__ static void load_a(uint32_t src, int row0, int kk, int lane, uint32_t (&a)[4]) {
    cuda::ldmatrix_x4(a, src + swizzle(row0 + (lane & 15), kk / 8 + (lane >> 4)));
  }
};

struct StreamArgs {
  const bf16* x;           // activation rows [*, K]
  const int32_t* x_rows;   // sorted position i -> x row x_rows[i] / x_rows_div; null: x row i
  int x_rows_div;
  int K;
  const void* W;           // [n_exp, w_rows, K] in the weight format
  int64_t w_rows;
  int64_t n_out;           // output columns: w_rows, or ff = w_rows / 2 in the gated form
  const int32_t* offsets;  // [n_exp + 1]
  bf16* y;                 // [pairs, n_out], row i = sorted position i
};

// Per stage: the weight tile, then the pass's x rows [kRowCap][kTileK] bf16 (same swizzle).
template <class Fmt> constexpr int kStageBytes = Fmt::kStageBytes + kRowCap * kTileK * 2;
template <class Fmt> constexpr int kSmemBytes = kStages * kStageBytes<Fmt>;

// One K step of kTileK for the warp's two m16 tiles over the pass's n_pairs pairs of n8 row tiles.
template <class Fmt>
__device__ __forceinline__ void stage_mma(uint32_t ws, int warp, int lane, int n_pairs,
                                          float (&acc)[2][kRowCap / 8][4]) {
  const uint32_t xs = ws + Fmt::kStageBytes;
  const int mi = lane >> 3;  // which 8x8 matrix of the x4 load this lane addresses
#pragma unroll
  for (int kk = 0; kk < kTileK; kk += 16) {
    uint32_t af[2][4];
#pragma unroll
    for (int t = 0; t < 2; ++t) Fmt::load_a(ws, 16 * (warp + t * kWarps), kk, lane, af[t]);
#pragma unroll
    for (int jp = 0; jp < kRowCap / 16; ++jp) {
      if (jp >= n_pairs) break;
      uint32_t b[4];  // rows 16jp .. +7 (k lo, k hi), rows 16jp + 8 .. +15 (k lo, k hi)
      cuda::ldmatrix_x4(b, xs + swizzle(jp * 16 + ((mi >> 1) << 3) + (lane & 7), kk / 8 + (mi & 1)));
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        cuda::mma_bf16_16816(acc[t][2 * jp], af[t], b[0], b[1]);
        cuda::mma_bf16_16816(acc[t][2 * jp + 1], af[t], b[2], b[3]);
      }
    }
  }
}

template <class Fmt, bool kGated>
__global__ void __launch_bounds__(kThreads) moe_stream_kernel(StreamArgs a) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ int64_t x_off[kRowCap];  // element offset of each pass row in x; -1: padding (zero-filled)
  const int e = static_cast<int>(blockIdx.y);
  const int r0 = a.offsets[e], r1 = a.offsets[e + 1];
  if (r0 >= r1) return;
  constexpr int kOutCols = kGated ? kTileN / 2 : kTileN;
  constexpr int kOutStride = kOutCols + 8;  // bf16 staging rows, padded against bank conflicts
  constexpr int kSplit = kGated ? kTileN / 2 : kTileN;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kOutCols;
  const TileRows rows{col0, kGated ? a.n_out + col0 : 0, kSplit,
                      static_cast<int>(a.n_out - col0 < kOutCols ? a.n_out - col0 : kOutCols)};
  const void* w = Fmt::expert(a.W, e, a.w_rows, a.K);
  const uint64_t policy = cuda::l2_evict_first();
  const uint32_t base = cuda::smem_u32(smem);
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int n_k = (a.K + kTileK - 1) / kTileK;

  for (int p0 = r0; p0 < r1; p0 += kRowCap) {
    const int m = r1 - p0 < kRowCap ? r1 - p0 : kRowCap;
    const int m_load = (m + 15) & ~15;  // rows up to the next n8 pair are zero-filled
    const int n_pairs = m_load / 16;
    for (int i = tid; i < kRowCap; i += kThreads)
      x_off[i] = i < m ? static_cast<int64_t>(a.x_rows ? a.x_rows[p0 + i] / a.x_rows_div : p0 + i) * a.K : -1;
    __syncthreads();

    auto load = [&](int kt) {
      const uint32_t ws = base + static_cast<uint32_t>((kt % kStages) * kStageBytes<Fmt>);
      const uint32_t xs = ws + Fmt::kStageBytes;
      const int k0 = kt * kTileK;
      Fmt::load_stage(ws, w, a.K, rows, k0, policy);
      for (int id = tid; id < m_load * kChunks; id += kThreads) {
        const int i = id / kChunks, c = id % kChunks, k = k0 + c * 8;
        const int64_t off = x_off[i];
        const bool ok = off >= 0 && k < a.K;
        cuda::cp_async16(xs + swizzle(i, c), ok ? a.x + off + k : a.x, ok);
      }
    };

    float acc[2][kRowCap / 8][4];
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int j = 0; j < kRowCap / 8; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[t][j][q] = 0.0f;

    for (int kt = 0; kt < kStages - 1; ++kt) {
      if (kt < n_k) load(kt);
      cuda::cp_async_commit();
    }
    for (int kt = 0; kt < n_k; ++kt) {
      cuda::cp_async_wait<kStages - 2>();  // stage kt has landed
      __syncthreads();                     // ... for every thread, and all warps are done with stage kt - 1
      if (kt + kStages - 1 < n_k) load(kt + kStages - 1);  // into stage kt - 1's buffer
      cuda::cp_async_commit();
      stage_mma<Fmt>(base + static_cast<uint32_t>((kt % kStages) * kStageBytes<Fmt>), warp, lane, n_pairs, acc);
    }
    cuda::cp_async_wait<0>();
    __syncthreads();

    // Accumulator element q of n8 tile j: weight row (lane / 4) + 8 (q / 2) of the m16 tile, routed row
    // 8 j + 2 (lane % 4) + q % 2. Staged through shared memory as [row][column] for coalesced stores.
    bf16* out = reinterpret_cast<bf16*>(smem);
#pragma unroll
    for (int j = 0; j < kRowCap / 8; ++j) {
      if (j >= 2 * n_pairs) break;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int i = 8 * j + 2 * (lane & 3) + (q & 1);
        const int c = 16 * warp + (lane >> 2) + 8 * (q >> 1);
        if constexpr (kGated) {  // as gelu_mul_split_cuda on the bf16 products
          const float g = cuda::rbf(acc[0][j][q]), u = cuda::rbf(acc[1][j][q]);
          out[i * kOutStride + c] = __float2bfloat16_rn(cuda::rbf(cuda::gelu_tanh(g)) * u);
        } else {
          out[i * kOutStride + c] = __float2bfloat16_rn(acc[0][j][q]);
          out[i * kOutStride + c + kTileN / 2] = __float2bfloat16_rn(acc[1][j][q]);
        }
      }
    }
    __syncthreads();
    const int n_cols = rows.valid;
    bf16* y = a.y + static_cast<int64_t>(p0) * a.n_out + col0;
    if (n_cols % 8 == 0 && a.n_out % 8 == 0 && (reinterpret_cast<uintptr_t>(a.y) & 15) == 0) {
      const int v = n_cols / 8;
      for (int id = tid; id < m * v; id += kThreads) {
        const int i = id / v, c = id % v;
        *reinterpret_cast<uint4*>(y + i * a.n_out + 8 * c) =
            *reinterpret_cast<const uint4*>(out + i * kOutStride + 8 * c);
      }
    } else {
      for (int id = tid; id < m * n_cols; id += kThreads) {
        const int i = id / n_cols, c = id % n_cols;
        y[i * a.n_out + c] = out[i * kOutStride + c];
      }
    }
    __syncthreads();  // the staging area and x_off are reused by the next pass
  }
}

template <class Fmt, bool kGated>
Status launch(const StreamArgs& a, int64_t n_exp, cudaStream_t s, const char* what) {
  static_assert(kRowCap * (kTileN + 8) * 2 <= kSmemBytes<Fmt>, "the output staging fits in the pipeline buffers");
  constexpr int kOutCols = kGated ? kTileN / 2 : kTileN;
  auto* kernel = moe_stream_kernel<Fmt, kGated>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes<Fmt>);
  if (err != cudaSuccess) return cuda_status(err, what);
  const dim3 grid(static_cast<unsigned>((a.n_out + kOutCols - 1) / kOutCols), static_cast<unsigned>(n_exp));
  kernel<<<grid, kThreads, kSmemBytes<Fmt>, s>>>(a);
  return cuda_status(cudaGetLastError(), what);
}

template <bool kGated>
Status stream_gemm(StreamArgs a, DType w_dtype, int64_t n_exp, cudaStream_t s, const char* what) {
  auto misaligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) != 0; };
  if (n_exp == 0 || a.n_out == 0) return Status::ok();
  if (a.K <= 0 || a.K % 8 != 0) return Status::error(std::string(what) + ": K must be a positive multiple of 8");
  if (misaligned(a.x) || misaligned(a.W)) return Status::error(std::string(what) + ": x and W must be 16-byte aligned");
  if (n_exp > 65535 || a.x_rows_div < 1) return Status::error(std::string(what) + ": bad expert count or row divisor");
  switch (w_dtype) {
    case DType::kBF16: return launch<WeightBf16, kGated>(a, n_exp, s, what);
    default: return Status::error(std::string(what) + ": weight dtype " + std::string(dtype_name(w_dtype)) +
                                  " is not a streaming-kernel format");
  }
}

}  // namespace

Status moe_stream_gemm_cuda(const void* x, const int32_t* x_rows, int x_rows_div, int64_t K, const void* W,
                            DType w_dtype, int64_t N, int64_t n_exp, const int32_t* offsets, void* y,
                            cudaStream_t s) {
  const StreamArgs a{static_cast<const bf16*>(x), x_rows, x_rows_div, static_cast<int>(K), W, N, N, offsets,
                     static_cast<bf16*>(y)};
  return stream_gemm<false>(a, w_dtype, n_exp, s, "moe_stream_gemm_cuda");
}

Status moe_stream_gate_up_cuda(const void* x, const int32_t* x_rows, int x_rows_div, int64_t K, const void* gate_up,
                               DType w_dtype, int64_t ff, int64_t n_exp, const int32_t* offsets, void* out,
                               cudaStream_t s) {
  const StreamArgs a{static_cast<const bf16*>(x), x_rows, x_rows_div, static_cast<int>(K), gate_up, 2 * ff, ff,
                     offsets, static_cast<bf16*>(out)};
  return stream_gemm<true>(a, w_dtype, n_exp, s, "moe_stream_gate_up_cuda");
}

}  // namespace dg
