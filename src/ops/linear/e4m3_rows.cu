// Our W8A8 product for at most 256 rows (e4m3_rows_cuda.h), on sm_90a. A CTA: a producer warpgroup whose one thread
// issues the TMA boxes of each stage (128 weight rows and the activation rows, 128 codes of K each, in the 128-byte
// swizzle) and two consumer warpgroups, each multiplying the 128 weight rows by its 128 activation rows (two m64
// wgmma tiles, e4m3 products promoted to f32 every stage: wgmma_e4m3_stage.cuh). Grid: column tiles of 128 weight
// rows along y, the K slices of a tile along x as one cluster. After the main loop each CTA writes its f32 partial
// tile into its own shared memory; CTA r of the cluster then adds every CTA's partial (rank 0 first, in order) for its
// share of the rows, reading the others through distributed shared memory, and stores them rounded once.
#include <algorithm>
#include <array>
#include <string>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "core/cuda/mbarrier.cuh"
#include "core/cuda/mma.cuh"
#include "core/cuda/tma_map.h"
#include "core/cuda/wgmma.cuh"
#include "core/cuda/wgmma_e4m3_stage.cuh"
#include "ops/linear/e4m3_rows_cuda.h"

namespace dg {
namespace {

using cuda::bf16;

constexpr int kTileK = 128;                             // codes of a row per stage
constexpr int kWTile = 128;                             // weight rows (output columns) per CTA: two m64 tiles
constexpr int kXRows = static_cast<int>(kE4m3RowsMax);  // activation rows: 128 per consumer
constexpr int kWgThreads = 128, kConsumers = 2, kThreads = (kConsumers + 1) * kWgThreads;
constexpr int kStages = 4;
constexpr int kMaxSplits = 4;
constexpr int kWBytes = kWTile * kTileK;                // 16 KB
constexpr int kStageBytes = kWBytes + kXRows * kTileK;  // + 32 KB
constexpr int kPartStride = kWTile + 4;                 // an activation row's f32 partial sums, padded
constexpr int kPartBytes = kXRows * kPartStride * 4;
constexpr int kSmemBytes = 1024 + (kStages * kStageBytes > kPartBytes ? kStages * kStageBytes : kPartBytes);
// Registers per thread after setmaxnreg: 2 x 128 x 232 + 128 x 40 = 64,512, the launch's 384 x 168.
[[maybe_unused]] constexpr int kProducerRegs = 40, kConsumerRegs = 232;
static_assert(kConsumers * kWgThreads * kConsumerRegs + kWgThreads * kProducerRegs <= kThreads * 168,
              "setmaxnreg hands out registers from the CTA's launch allocation");
static_assert(kSmemBytes + 64 <= 227 * 1024, "the stages fit an SM's shared memory");

struct RowsArgs {
  CUtensorMap wmap;  // the weight codes [n, k]: boxes of 64 rows x 128 codes, 128-byte swizzle, zeros past the ends
  CUtensorMap xmap;  // the activation codes [rows, k], the same boxes
  int rows, n, n_kb;  // n_kb: stages of 128 codes over K
  int64_t ld;
  void* out;
};

#if DG_HAS_WGMMA

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// Every thread of every CTA of the cluster: what each wrote to shared memory before is visible to all after.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ float4 ld_cluster_f4(uint32_t addr, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(addr), "r"(rank));
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(remote)
               : "memory");
  return v;
}

// Consumer c's main loop over the CTA's stages (N: its activation rows rounded up to 64 or 128), then, once every
// warpgroup is past the stages (named barrier 1), its f32 partial sums into the partial tile at `part` [row][column].
// Accumulator element q of n8 tile j of m64 tile t: weight row 64 t + 16 warp + lane / 4 + 8 (q / 2), activation
// row 128 c + 8 j + 2 (lane % 4) + q % 2.
template <int N>
__device__ __forceinline__ void consume(uint32_t base, uint32_t full, uint32_t empty, int c, int n_k, int rows,
                                        float* part) {
  float acc[2][N / 8][4];
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int j = 0; j < N / 8; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[t][j][q] = 0.0f;
  for (int it = 0; it < n_k; ++it) {
    const uint32_t s = static_cast<uint32_t>(it) % kStages;
    cuda::mbar_wait(full + 8 * s, (static_cast<uint32_t>(it) / kStages) & 1u);
    const uint32_t st = base + s * kStageBytes;
    cuda::e4m3_stage<N>(st, st + kWBytes + c * 128 * kTileK, acc);
    cuda::mbar_arrive(empty + 8 * s);
  }
  cuda::named_sync(1, kThreads);  // the stages' buffers become the partial tile
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = (static_cast<int>(threadIdx.x) >> 5) & 3;
#pragma unroll
  for (int j = 0; j < N / 8; ++j)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int i = 128 * c + 8 * j + 2 * (lane & 3) + (q & 1);
      const int col = 16 * warp + (lane >> 2) + 8 * (q >> 1);
      if (i < rows) {
        part[i * kPartStride + col] = acc[0][j][q];
        part[i * kPartStride + col + 64] = acc[1][j][q];
      }
    }
}

#endif  // DG_HAS_WGMMA

template <bool kF32Out>
__global__ void __launch_bounds__(kThreads, 1) e4m3_rows_kernel(const __grid_constant__ RowsArgs a) {
  cuda::pdl_enter();
#if DG_HAS_WGMMA
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ __align__(8) uint64_t s_full[kStages], s_empty[kStages];
  const int tid = static_cast<int>(threadIdx.x), wg = tid / kWgThreads;
  const uint32_t base = (cuda::smem_u32(smem) + 1023u) & ~1023u;
  float* part = reinterpret_cast<float*>(smem + (base - cuda::smem_u32(smem)));
  const uint32_t full = cuda::smem_u32(s_full), empty = cuda::smem_u32(s_empty);
  const int splits = static_cast<int>(gridDim.x), rank = static_cast<int>(cluster_rank());
  const int kb0 = a.n_kb * rank / splits, kb1 = a.n_kb * (rank + 1) / splits, n_k = kb1 - kb0;
  const int n0 = static_cast<int>(blockIdx.y) * kWTile;
  // Consumer c multiplies min(128, rows - 128 c) activation rows, rounded up to 64 or 128.
  const int m1 = a.rows > 128 ? a.rows - 128 : 0;
  const int n_rows[kConsumers] = {a.rows > 128 ? 128 : a.rows > 64 ? 128 : 64, m1 == 0 ? 0 : m1 > 64 ? 128 : 64};
  const int active = n_rows[1] > 0 ? 2 : 1;
  if (tid < kStages) {
    cuda::mbar_init(full + 8 * tid, 1);
    cuda::mbar_init(empty + 8 * tid, active * kWgThreads);
  }
  cuda::mbar_init_fence();
  __syncthreads();

  if (wg == kConsumers) {  // the producer: one thread issues every box
    cuda::regs_dec<kProducerRegs>();
    if (tid == kConsumers * kWgThreads) {
      const uint32_t bytes = kWBytes + (n_rows[0] + n_rows[1]) * kTileK;
      for (int it = 0; it < n_k; ++it) {
        const uint32_t s = static_cast<uint32_t>(it) % kStages;
        if (it >= kStages) cuda::mbar_wait(empty + 8 * s, (static_cast<uint32_t>(it) / kStages - 1) & 1u);
        const uint32_t st = base + s * kStageBytes, bar = full + 8 * s;
        const int k0 = (kb0 + it) * kTileK;
        cuda::mbar_arrive_expect_tx(bar, bytes);
        cuda::tma_load_2d(st, &a.wmap, k0, n0, bar);
        cuda::tma_load_2d(st + 64 * kTileK, &a.wmap, k0, n0 + 64, bar);
#pragma unroll
        for (int c = 0; c < kConsumers; ++c)
          for (int b = 0; b < n_rows[c] / 64; ++b)
            cuda::tma_load_2d(st + kWBytes + (128 * c + 64 * b) * kTileK, &a.xmap, k0, 128 * c + 64 * b, bar);
      }
    }
    cuda::named_sync(1, kThreads);
  } else {
    cuda::regs_inc<kConsumerRegs>();
    const int c = wg;
    if (n_rows[c] == 128) consume<128>(base, full, empty, c, n_k, a.rows, part);
    else if (n_rows[c] == 64) consume<64>(base, full, empty, c, n_k, a.rows, part);
    else cuda::named_sync(1, kThreads);
  }

  // Rank r's share of the rows, summed over the cluster's partial tiles in rank order.
  cluster_sync();
  const int per = (a.rows + splits - 1) / splits, r0 = rank * per, r1 = min(a.rows, r0 + per);
  for (int f = tid; f < (r1 - r0) * (kWTile / 4); f += kThreads) {
    const int row = r0 + f / (kWTile / 4), c4 = f % (kWTile / 4), col = n0 + 4 * c4;
    if (col >= a.n) continue;  // n is a multiple of 16: a group of four is in or out
    const uint32_t addr = base + static_cast<uint32_t>(row * kPartStride + 4 * c4) * 4u;
    float4 v = ld_cluster_f4(addr, 0);
    for (int q = 1; q < splits; ++q) {
      const float4 w = ld_cluster_f4(addr, static_cast<uint32_t>(q));
      v.x += w.x;
      v.y += w.y;
      v.z += w.z;
      v.w += w.w;
    }
    if constexpr (kF32Out) {
      *reinterpret_cast<float4*>(static_cast<float*>(a.out) + row * a.ld + col) = v;
    } else {
      const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
      uint2 pk;
      pk.x = *reinterpret_cast<const uint32_t*>(&lo);
      pk.y = *reinterpret_cast<const uint32_t*>(&hi);
      *reinterpret_cast<uint2*>(static_cast<bf16*>(a.out) + row * a.ld + col) = pk;
    }
  }
  cluster_sync();  // no CTA leaves while another reads its partial tile
#else
  (void)a;
  __trap();  // e4m3_rows_takes refuses devices without sm_90a code
#endif
}

constexpr int n_tiles(int64_t n) { return static_cast<int>((n + kWTile - 1) / kWTile); }
constexpr int n_stages(int64_t k) { return static_cast<int>((k + kTileK - 1) / kTileK); }

// How many clusters of `splits` CTAs the GPU holds at once (each CTA an SM's shared memory), by the occupancy query.
int cluster_capacity(int splits) {
  static std::array<int, kMaxSplits + 1> cap = [] {
    std::array<int, kMaxSplits + 1> c{};
    cudaFuncSetAttribute(e4m3_rows_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    for (int s = 1; s <= kMaxSplits; ++s) {
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = dim3(static_cast<unsigned>(s), 1);
      cfg.blockDim = dim3(kThreads);
      cfg.dynamicSmemBytes = kSmemBytes;
      cudaLaunchAttribute attr{};
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = static_cast<unsigned>(s);
      attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      int got = 0;
      if (cudaOccupancyMaxActiveClusters(&got, e4m3_rows_kernel<false>, &cfg) != cudaSuccess) got = 0;
      c[static_cast<size_t>(s)] = got;
    }
    (void)cudaGetLastError();
    return c;
  }();
  return cap[static_cast<size_t>(splits)];
}

}  // namespace

int e4m3_rows_splits(int64_t k, int64_t n) {
  const int tiles = n_tiles(n), n_kb = n_stages(k);
  // Time in stages of the busiest SM: the waves of clusters times a CTA's stages, plus about five stages of launch,
  // fill and store, and one more for the cluster's sums (H100: about 1.2 us a stage and 6.5 us besides).
  int best = 0;
  int64_t best_cost = 0;
  for (int s = 1; s <= std::min(kMaxSplits, n_kb); ++s) {
    const int cap = cluster_capacity(s);
    if (cap <= 0) continue;
    const int64_t waves = (tiles + cap - 1) / cap;
    const int64_t cost = waves * ((n_kb + s - 1) / s + 5 + (s > 1 ? 1 : 0));
    if (best == 0 || cost < best_cost) {
      best = s;
      best_cost = cost;
    }
  }
  return best;
}

Status e4m3_rows_takes(int64_t rows, int64_t k, int64_t n, const void* xq, const void* wq, const void* out,
                       bool f32_out, int64_t ld) {
  const std::string what = "linear_e4m3_rows_cuda";
  if (rows < 1 || rows > kE4m3RowsMax)
    return Status::error(what + ": " + std::to_string(rows) + " activation rows; the kernel takes 1 to " +
                         std::to_string(kE4m3RowsMax));
  if (k <= 0 || k % 16 != 0 || n <= 0 || n % 16 != 0)
    return Status::error(what + ": K = " + std::to_string(k) + " and N = " + std::to_string(n) +
                         " must be positive multiples of 16");
  if (k > (int64_t{1} << 30) || n > (int64_t{1} << 30))
    return Status::error(what + ": K and N must stay under 2^30");
  if (ld < n || ld % 4 != 0)
    return Status::error(what + ": the output's row stride " + std::to_string(ld) + " must be at least its " +
                         std::to_string(n) + " columns and a multiple of 4");
  const auto addr = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
  if ((addr(xq) | addr(wq)) % 16 != 0) return Status::error(what + ": the codes must be 16-byte aligned (TMA)");
  if (addr(out) % (f32_out ? 16 : 8) != 0)
    return Status::error(what + ": the output must be " + std::string(f32_out ? "16" : "8") + "-byte aligned");
  static const bool sm90 = cuda::device_is_sm90();
  if (!sm90) return Status::error(what + ": needs a GPU of compute capability 9.0 (Hopper; its sm_90a code)");
  if (cuda::tensor_map_encoder() == nullptr)
    return Status::error(what + ": the driver has no cuTensorMapEncodeTiled (TMA)");
  return Status::ok();
}

Status linear_e4m3_rows_cuda(const void* xq, int64_t rows, int64_t k, const void* wq, int64_t n, void* out,
                             bool f32_out, int64_t ld, cudaStream_t s, int splits) {
  const std::string what = "linear_e4m3_rows_cuda";
  if (rows == 0) return Status::ok();
  if (Status st = e4m3_rows_takes(rows, k, n, xq, wq, out, f32_out, ld); !st.is_ok()) return st;
  const int n_kb = n_stages(k);
  if (splits == 0) splits = e4m3_rows_splits(k, n);
  if (splits < 1 || splits > kMaxSplits || splits > n_kb)
    return Status::error(what + ": " + std::to_string(splits) + " splits of K = " + std::to_string(k) +
                         "; 1 to " + std::to_string(std::min(kMaxSplits, n_kb)) + " (or 0: chosen by the shape)");
  RowsArgs a{};
  a.rows = static_cast<int>(rows);
  a.n = static_cast<int>(n);
  a.n_kb = n_kb;
  a.ld = ld;
  a.out = out;
  if (Status st = cuda::rows_map(static_cast<const uint8_t*>(wq), CU_TENSOR_MAP_DATA_TYPE_UINT8, k, n, k, kTileK,
                                 CU_TENSOR_MAP_SWIZZLE_128B, a.wmap, what, "the weight codes");
      !st.is_ok())
    return st;
  if (Status st = cuda::rows_map(static_cast<const uint8_t*>(xq), CU_TENSOR_MAP_DATA_TYPE_UINT8, k, rows, k, kTileK,
                                 CU_TENSOR_MAP_SWIZZLE_128B, a.xmap, what, "the activation codes");
      !st.is_ok())
    return st;
  auto* kernel = f32_out ? e4m3_rows_kernel<true> : e4m3_rows_kernel<false>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  if (err != cudaSuccess) return cuda_status(err, what.c_str());
  const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(n_tiles(n)));
  cuda::launch_cluster(kernel, grid, kThreads, kSmemBytes, s, static_cast<unsigned>(splits), a);
  return cuda_status(cudaGetLastError(), what.c_str());
}

}  // namespace dg
