// Flash-style attention on tensor cores (mma.sync m16n8k16, f16 in, f32 accumulate), for head dims that are
// multiples of 16 up to 512: one launch per call (the block body: flash_block.cuh), with the keys of bidirectional
// (canvas) attention split over blocks when the grid would leave the GPU idle (flash-decoding) and the partials
// merged by combine_kernel. Head dims 256 and 512 take the wgmma blocks (flash_wgmma.cuh, flash_wgmma512.cuh) when
// the caller asks for them.
#include <algorithm>
#include <cstdint>
#include <string>

#include "core/cuda/capture_arena.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/attention/attention_cuda.h"
#include "ops/attention/flash_block.cuh"
#include "ops/attention/flash_pair.cuh"
#include "ops/attention/flash_wgmma512.cuh"

namespace dg {
namespace {

using namespace flash;

template <int kD, int kDv>
__global__ void __launch_bounds__(kThreads) flash_kernel(FlashArgs a) {
  cuda::pdl_enter();
  flash_block<kD, kDv>(a, static_cast<int64_t>(blockIdx.x) * kRows, static_cast<int>(blockIdx.y),
                       static_cast<int>(blockIdx.z));
}

template <int kD>
__global__ void __launch_bounds__(kPairThreads) flash_pair_kernel(FlashArgs a) {
  cuda::pdl_enter();
  flash_pair_block<kD>(a, static_cast<int64_t>(blockIdx.x) * kRows, static_cast<int>(blockIdx.y),
                       static_cast<int>(blockIdx.z));
}

template <int kD>
__global__ void __launch_bounds__(kWgThreads, 1) flash_wgmma_kernel(FlashArgs a, bool pair) {
  cuda::pdl_enter();
#if DG_HAS_WGMMA
  flash_wgmma_run<kD>(a, static_cast<int64_t>(blockIdx.x), static_cast<int>(blockIdx.y),
                      static_cast<int>(blockIdx.z), pair);
#else
  (void)a;
  (void)pair;
#endif
}

// Never launched: built for the same architectures as flash_wgmma_kernel, it has static shared memory exactly in the
// code that has wgmma (DG_HAS_WGMMA), which cudaFuncGetAttributes reports for the code this device would run.
__global__ void wgmma_probe_kernel(int* sink) {
  cuda::pdl_enter();
#if DG_HAS_WGMMA
  __shared__ int marker[32];
  marker[threadIdx.x & 31] = static_cast<int>(threadIdx.x);
  __syncthreads();
  if (sink != nullptr) *sink = marker[(threadIdx.x + 1) & 31];
#else
  (void)sink;
#endif
}

// out[r, h, d] = sum_s w_s o_s[r, h, d] / sum_s w_s with w_s = l_s exp(m_s - max_s m_s) (splits without a visible
// key have l_s = 0 and weigh nothing). A thread takes four consecutive d (D is a multiple of 4): 16-byte loads.
__global__ void combine_kernel(const float* part_o, const float* part_ml, int n_splits, int64_t rows, int n_heads,
                               int64_t D, bf16* out) {
  cuda::pdl_enter();
  const int64_t i = 4 * (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x);
  const int64_t total = rows * n_heads * D;
  if (i >= total) return;
  const int64_t rh = i / D;  // r * n_heads + h
  float mx = -INFINITY;
  for (int sp = 0; sp < n_splits; ++sp) {
    const float2 ml = reinterpret_cast<const float2*>(part_ml)[sp * rows * n_heads + rh];
    if (ml.y > 0.0f) mx = fmaxf(mx, ml.x);
  }
  float4 num = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float den = 0.0f;
  for (int sp = 0; sp < n_splits; ++sp) {
    const float2 ml = reinterpret_cast<const float2*>(part_ml)[sp * rows * n_heads + rh];
    if (ml.y <= 0.0f) continue;
    const float w = ml.y * expf(ml.x - mx);
    const float4 o = *reinterpret_cast<const float4*>(part_o + sp * total + i);
    num.x += w * o.x;
    num.y += w * o.y;
    num.z += w * o.z;
    num.w += w * o.w;
    den += w;
  }
  auto ratio = [den](float v) { return den > 0.0f ? v / den : 0.0f; };
  auto* o2 = reinterpret_cast<__nv_bfloat162*>(out + i);
  o2[0] = __floats2bfloat162_rn(ratio(num.x), ratio(num.y));
  o2[1] = __floats2bfloat162_rn(ratio(num.z), ratio(num.w));
}

// Launches `kernel` over (row tiles, heads, slices x key splits): bidirectional (canvas) attention splits its keys
// (tiles of tile_keys) so that the grid fills the GPU's resident blocks in one wave (a partial second wave costs as
// much as a full one); causal prefill has query tiles enough and keeps one split. Partials merge in combine_kernel.
// A block takes block_rows query rows of block_heads heads (grid y: n_heads / block_heads).
template <int kD, class Kernel, class... Extra>
Status launch_split(Kernel kernel, int threads, size_t smem, int per_sm, int slices, int tile_keys, FlashArgs a,
                    int max_splits, cudaStream_t s, int block_rows = kRows, int block_heads = 1, Extra... extra) {
  const int heads = a.n_heads / block_heads;
  const int64_t q_tiles = (a.rows + block_rows - 1) / block_rows, base = q_tiles * heads * slices;
  const int64_t tiles = (a.n_cached + a.n_fresh + tile_keys - 1) / tile_keys;
  int64_t splits = 1;
  if (!a.causal && max_splits > 1 && tiles > 1) {
    const int64_t slots = static_cast<int64_t>(per_sm) * cuda::sm_count();
    splits = std::max<int64_t>(1, std::min<int64_t>({max_splits, tiles, slots / base}));
  }
  a.tiles_per_split = static_cast<int>((tiles + splits - 1) / splits);
  a.n_splits = static_cast<int>(splits == 1 ? 1 : (tiles + a.tiles_per_split - 1) / a.tiles_per_split);
  const int64_t ld = static_cast<int64_t>(a.n_heads) * kD, total = a.rows * ld;
  void* scratch = nullptr;
  if (a.n_splits > 1) {
    const size_t bytes = sizeof(float) * static_cast<size_t>(a.n_splits) * (total + a.rows * a.n_heads * 2);
    const cudaError_t e = cuda::stream_alloc(&scratch, bytes, s);
    if (e != cudaSuccess) return cuda_status(e, "attention_flash_cuda (split scratch)");
    a.part_o = static_cast<float*>(scratch);
    a.part_ml = a.part_o + a.n_splits * total;
  }
  const dim3 grid(static_cast<unsigned>(q_tiles), static_cast<unsigned>(heads),
                  static_cast<unsigned>(slices * a.n_splits));
  cuda::launch(kernel, grid, threads, smem, s, a, extra...);
  if (a.n_splits > 1) {
    static_assert(kD % 4 == 0, "the combine takes four columns per thread");
    cuda::launch(combine_kernel, cuda::blocks_for(total / 4, 256), 256, 0, s, a.part_o, a.part_ml, a.n_splits, a.rows,
                                                                     a.n_heads, kD, a.out);
    cuda::stream_free(scratch, s);
  }
  return cuda_status(cudaGetLastError(), "attention_flash_cuda");
}

template <int kD, int kDv>
Status launch(FlashArgs a, int max_splits, cudaStream_t s) {
  constexpr size_t smem = smem_bytes<kD, kDv>();
  static const cudaError_t attr = cudaFuncSetAttribute(flash_kernel<kD, kDv>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       static_cast<int>(smem));
  if (attr != cudaSuccess) return cuda_status(attr, "attention_flash_cuda (shared memory)");
  static const int per_sm = cuda::resident_per_sm(flash_kernel<kD, kDv>, kThreads, smem);
  return launch_split<kD>(flash_kernel<kD, kDv>, kThreads, smem, per_sm, kD / kDv, kKeys, a, max_splits, s);
}

template <int kD>
Status launch_pair(FlashArgs a, int max_splits, cudaStream_t s) {
  constexpr size_t smem = pair_smem_bytes<kD>();
  static const cudaError_t attr = cudaFuncSetAttribute(flash_pair_kernel<kD>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       static_cast<int>(smem));
  if (attr != cudaSuccess) return cuda_status(attr, "attention_flash_cuda (shared memory, warp pairs)");
  static const int per_sm = cuda::resident_per_sm(flash_pair_kernel<kD>, kPairThreads, smem);
  return launch_split<kD>(flash_pair_kernel<kD>, kPairThreads, smem, per_sm, 1, kPairKeys, a, max_splits, s);
}

template <int kD>
Status launch_wgmma(FlashArgs a, int max_splits, cudaStream_t s) {
  constexpr size_t smem = wg_smem_bytes<kD>();
  static const cudaError_t attr = cudaFuncSetAttribute(flash_wgmma_kernel<kD>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       static_cast<int>(smem));
  if (attr != cudaSuccess) return cuda_status(attr, "attention_flash_cuda (shared memory, wgmma)");
  static const int per_sm = cuda::resident_per_sm(flash_wgmma_kernel<kD>, kWgThreads, smem);  // after the attribute
  const WgShape b = wg_shape(kD, a.n_heads, a.n_kv);
  return launch_split<kD>(flash_wgmma_kernel<kD>, kWgThreads, smem, per_sm, 1, kWgKeys, a, max_splits, s, b.rows,
                          b.heads, b.pair);
}

}  // namespace

bool attention_flash_wgmma_available() {
  static const bool ok = [] {
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess || major != 9)
      return false;
    cudaFuncAttributes fa{};
    if (cudaFuncGetAttributes(&fa, wgmma_probe_kernel) != cudaSuccess) {
      (void)cudaGetLastError();  // no error left behind for the next launch's check
      return false;
    }
    return fa.sharedSizeBytes > 0;
  }();
  return ok;
}

Status attention_flash_wgmma_check(const char* what) {
  if (attention_flash_wgmma_available()) return Status::ok();
  return Status::error(std::string(what) + ": --attention-wgmma needs an sm_90a build and a Hopper GPU");
}

bool attention_flash_supports(int64_t head_dim) {
  return head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256 || head_dim == 512;
}

bool attention_flash_pairs(int64_t head_dim, int pair_min_dim) {
  return pair_min_dim > 0 && head_dim >= pair_min_dim && (head_dim == 256 || head_dim == 512);
}

Status attention_flash_cuda(const void* q, int64_t rows, int64_t q_pos0, const CachedKv& cached, const void* k_fresh,
                            const void* v_fresh, int64_t n_fresh, int64_t fresh_pos0, const AttnShape& shape,
                            bool causal, int64_t window, void* out, cudaStream_t s, int max_splits, int out_cols,
                            int pair_min_dim, bool wgmma) {
  const int64_t n_cached = cached.to - cached.from;
  if (rows == 0) return Status::ok();
  if (out_cols != 128 && out_cols != 256)
    return Status::error("attention_flash_cuda: output columns per block must be 128 or 256, not " +
                         std::to_string(out_cols));
  if (n_cached > 0 && n_fresh > 0 && cached.to != fresh_pos0)
    return Status::error("attention_flash_cuda: cached and fresh keys are not contiguous");
  if (cached.ring && (cached.cap <= 0 || n_cached > cached.cap))
    return Status::error("attention_flash_cuda: " + std::to_string(n_cached) + " cached keys do not fit a ring of " +
                         std::to_string(cached.cap));
  if (!attention_flash_supports(shape.head_dim))
    return Status::error("attention_flash_cuda: head_dim " + std::to_string(shape.head_dim) +
                         " is not one of 16, 32, 64, 128, 256, 512 (use the gemm attention kernel)");
  const bool use_wgmma = wgmma && wg_head_dim(shape.head_dim);
  if (use_wgmma)
    if (Status st = attention_flash_wgmma_check("attention_flash_cuda"); !st.is_ok()) return st;
  FlashArgs a{};
  a.q = static_cast<const bf16*>(q);
  a.ck = static_cast<const f16*>(cached.k);
  a.cv = static_cast<const f16*>(cached.v);
  a.kf = static_cast<const f16*>(k_fresh);
  a.vf = static_cast<const f16*>(v_fresh);
  a.out = static_cast<bf16*>(out);
  a.cap = cached.cap;
  a.slot0 = cached.ring ? cached.from % cached.cap : cached.from;
  a.n_cached = n_cached;
  a.n_fresh = n_fresh;
  a.rows = rows;
  a.q_pos0 = q_pos0;
  a.key_pos0 = n_cached > 0 ? cached.from : fresh_pos0;
  a.window = window;
  a.n_heads = static_cast<int>(shape.n_heads);
  a.n_kv = static_cast<int>(shape.n_kv_heads);
  a.ring = cached.ring;
  a.causal = causal;
  if (use_wgmma)
    return shape.head_dim == kWgD ? launch_wgmma<kWgD>(a, max_splits, s) : launch_wgmma<kWg5D>(a, max_splits, s);
  if (attention_flash_pairs(shape.head_dim, pair_min_dim))
    return shape.head_dim == 256 ? launch_pair<256>(a, max_splits, s) : launch_pair<512>(a, max_splits, s);
  const bool wide = out_cols >= 256;
  switch (shape.head_dim) {
    case 16: return launch<16, 16>(a, max_splits, s);
    case 32: return launch<32, 32>(a, max_splits, s);
    case 64: return launch<64, 64>(a, max_splits, s);
    case 128: return launch<128, 128>(a, max_splits, s);
    case 256: return wide ? launch<256, 256>(a, max_splits, s) : launch<256, 128>(a, max_splits, s);
    default: return wide ? launch<512, 256>(a, max_splits, s) : launch<512, 128>(a, max_splits, s);
  }
}

}  // namespace dg
