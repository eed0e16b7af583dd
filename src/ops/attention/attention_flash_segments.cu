// The flash kernel over several sequences in one launch (attention_cuda.h: attention_flash_segments_cuda): the
// grid's x runs over every sequence's query tiles in turn, and a block finds its sequence in the launch's table
// (kernel parameters, up to kMaxSegments per launch), then runs the block body of flash_block.cuh on it (or
// flash_pair.cuh's, or for head dims 256 and 512 on request the wgmma blocks', whose blocks may take 128 rows:
// tile_rows).
#include <cstdint>
#include <string>

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

constexpr int kMaxSegments = 48;  // 48 x 176-byte FlashArgs: within the 32 KB of kernel parameters

struct SegmentTable {
  FlashArgs seg[kMaxSegments];
  int tile0[kMaxSegments + 1];  // sequence i's query tiles are grid x in [tile0[i], tile0[i + 1])
  int n = 0;
};

template <int kD, int kDv>
__global__ void __launch_bounds__(kThreads) flash_segments_kernel(const __grid_constant__ SegmentTable t) {
  cuda::pdl_enter();
  const int x = static_cast<int>(blockIdx.x);
  int i = 0;
  while (i + 1 < t.n && t.tile0[i + 1] <= x) ++i;
  flash_block<kD, kDv>(t.seg[i], static_cast<int64_t>(x - t.tile0[i]) * kRows, static_cast<int>(blockIdx.y),
                       static_cast<int>(blockIdx.z));
}

template <int kD>
__global__ void __launch_bounds__(kPairThreads) flash_pair_segments_kernel(const __grid_constant__ SegmentTable t) {
  cuda::pdl_enter();
  const int x = static_cast<int>(blockIdx.x);
  int i = 0;
  while (i + 1 < t.n && t.tile0[i + 1] <= x) ++i;
  flash_pair_block<kD>(t.seg[i], static_cast<int64_t>(x - t.tile0[i]) * kRows, static_cast<int>(blockIdx.y), 0);
}

template <int kD>
__global__ void __launch_bounds__(kWgThreads, 1)
    flash_wgmma_segments_kernel(const __grid_constant__ SegmentTable t, bool pair) {
  cuda::pdl_enter();
#if DG_HAS_WGMMA
  const int x = static_cast<int>(blockIdx.x);
  int i = 0;
  while (i + 1 < t.n && t.tile0[i + 1] <= x) ++i;
  flash_wgmma_run<kD>(t.seg[i], x - t.tile0[i], static_cast<int>(blockIdx.y), 0, pair);
#else
  (void)t;
  (void)pair;
#endif
}

// The shared-memory limit of the wgmma kernel for head dim kD, raised once (before any launch or occupancy query:
// the query counts dynamic shared memory only up to what the kernel is allowed).
template <int kD>
cudaError_t wgmma_smem_attr() {
  static const cudaError_t e = cudaFuncSetAttribute(flash_wgmma_segments_kernel<kD>,
                                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                    static_cast<int>(wg_smem_bytes<kD>()));
  return e;
}

template <int kD>
Status launch_wgmma(const SegmentTable& t, int n_heads, const WgShape& b, cudaStream_t s) {
  if (const cudaError_t e = wgmma_smem_attr<kD>(); e != cudaSuccess)
    return cuda_status(e, "attention_flash_segments_cuda (shared memory, wgmma)");
  const dim3 grid(static_cast<unsigned>(t.tile0[t.n]), static_cast<unsigned>(n_heads / b.heads), 1);
  cuda::launch(flash_wgmma_segments_kernel<kD>, grid, kWgThreads, wg_smem_bytes<kD>(), s, t, b.pair);
  return cuda_status(cudaGetLastError(), "attention_flash_segments_cuda");
}

template <int kD>
Status launch_pair(const SegmentTable& t, int n_heads, cudaStream_t s) {
  constexpr size_t smem = pair_smem_bytes<kD>();
  static const cudaError_t attr = cudaFuncSetAttribute(flash_pair_segments_kernel<kD>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       static_cast<int>(smem));
  if (attr != cudaSuccess) return cuda_status(attr, "attention_flash_segments_cuda (shared memory, warp pairs)");
  const dim3 grid(static_cast<unsigned>(t.tile0[t.n]), static_cast<unsigned>(n_heads), 1);
  cuda::launch(flash_pair_segments_kernel<kD>, grid, kPairThreads, smem, s, t);
  return cuda_status(cudaGetLastError(), "attention_flash_segments_cuda");
}

template <int kD, int kDv>
Status launch(const SegmentTable& t, int n_heads, cudaStream_t s) {
  constexpr size_t smem = smem_bytes<kD, kDv>();
  static const cudaError_t attr = cudaFuncSetAttribute(flash_segments_kernel<kD, kDv>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       static_cast<int>(smem));
  if (attr != cudaSuccess) return cuda_status(attr, "attention_flash_segments_cuda (shared memory)");
  const dim3 grid(static_cast<unsigned>(t.tile0[t.n]), static_cast<unsigned>(n_heads), kD / kDv);
  cuda::launch(flash_segments_kernel<kD, kDv>, grid, kThreads, smem, s, t);
  return cuda_status(cudaGetLastError(), "attention_flash_segments_cuda");
}

template <int kD, int kDv>
int blocks_per_sm() {
  static const int n = cuda::resident_per_sm(flash_segments_kernel<kD, kDv>, kThreads, smem_bytes<kD, kDv>());
  return n;
}

template <int kD>
int pair_blocks_per_sm() {
  static const int n = cuda::resident_per_sm(flash_pair_segments_kernel<kD>, kPairThreads, pair_smem_bytes<kD>());
  return n;
}

template <int kD>
int wgmma_blocks_per_sm() {
  static const int n = [] {
    (void)wgmma_smem_attr<kD>();
    return cuda::resident_per_sm(flash_wgmma_segments_kernel<kD>, kWgThreads, wg_smem_bytes<kD>());
  }();
  return n;
}

int resident_blocks(int64_t head_dim, int out_cols, int pair_min_dim, bool wgmma) {
  if (wgmma) return head_dim == kWgD ? wgmma_blocks_per_sm<kWgD>() : wgmma_blocks_per_sm<kWg5D>();
  if (attention_flash_pairs(head_dim, pair_min_dim))
    return head_dim == 256 ? pair_blocks_per_sm<256>() : pair_blocks_per_sm<512>();
  const bool wide = out_cols >= 256;
  switch (head_dim) {
    case 16: return blocks_per_sm<16, 16>();
    case 32: return blocks_per_sm<32, 32>();
    case 64: return blocks_per_sm<64, 64>();
    case 128: return blocks_per_sm<128, 128>();
    case 256: return wide ? blocks_per_sm<256, 256>() : blocks_per_sm<256, 128>();
    default: return wide ? blocks_per_sm<512, 256>() : blocks_per_sm<512, 128>();
  }
}

}  // namespace

bool attention_flash_segments_fill(std::span<const FlashSegment> segs, const AttnShape& shape, int out_cols,
                                   int pair_min_dim, bool wgmma) {
  if (!attention_flash_supports(shape.head_dim)) return false;
  const bool wg = wgmma && wg_head_dim(shape.head_dim) && attention_flash_wgmma_available();
  const WgShape b = wg_shape(shape.head_dim, shape.n_heads, shape.n_kv_heads);
  const int64_t tile_rows = wg ? b.rows : kRows;
  const int64_t heads = wg ? shape.n_heads / b.heads : shape.n_heads;
  int64_t tiles = 0;
  for (const FlashSegment& g : segs) tiles += (g.rows + tile_rows - 1) / tile_rows;
  const bool pairs = attention_flash_pairs(shape.head_dim, pair_min_dim);
  const int64_t slices = !wg && !pairs && shape.head_dim > out_cols ? shape.head_dim / out_cols : 1;
  return tiles * heads * slices >=
         static_cast<int64_t>(resident_blocks(shape.head_dim, out_cols, pair_min_dim, wg)) * cuda::sm_count();
}

Status attention_flash_segments_cuda(const void* q, std::span<const FlashSegment> segs, const void* k_fresh,
                                     const void* v_fresh, const AttnShape& shape, bool causal, int64_t window,
                                     void* out, cudaStream_t s, int out_cols, int pair_min_dim, bool wgmma) {
  const char* what = "attention_flash_segments_cuda";
  if (out_cols != 128 && out_cols != 256)
    return Status::error(std::string(what) + ": output columns per block must be 128 or 256, not " +
                         std::to_string(out_cols));
  if (!attention_flash_supports(shape.head_dim))
    return Status::error(std::string(what) + ": head_dim " + std::to_string(shape.head_dim) +
                         " is not one of 16, 32, 64, 128, 256, 512 (use the gemm attention kernel)");
  const int64_t D = shape.head_dim, q_row = shape.n_heads * D, kv_row = shape.n_kv_heads * D;
  const bool wide = out_cols >= 256, pairs = attention_flash_pairs(D, pair_min_dim);
  const bool wg = wgmma && wg_head_dim(D);
  const WgShape wg_blk = wg_shape(D, shape.n_heads, shape.n_kv_heads);
  if (wg)
    if (Status st = attention_flash_wgmma_check(what); !st.is_ok()) return st;
  const int64_t tile_rows = wg ? wg_blk.rows : kRows;
  SegmentTable t{};
  int tiles = 0;
  auto flush = [&]() -> Status {
    if (t.n == 0) return Status::ok();
    t.tile0[t.n] = tiles;
    const int H = static_cast<int>(shape.n_heads);
    Status st;
    if (wg)
      st = D == kWgD ? launch_wgmma<kWgD>(t, H, wg_blk, s) : launch_wgmma<kWg5D>(t, H, wg_blk, s);
    else if (pairs)
      st = D == 256 ? launch_pair<256>(t, H, s) : launch_pair<512>(t, H, s);
    else switch (D) {
      case 16: st = launch<16, 16>(t, H, s); break;
      case 32: st = launch<32, 32>(t, H, s); break;
      case 64: st = launch<64, 64>(t, H, s); break;
      case 128: st = launch<128, 128>(t, H, s); break;
      case 256: st = wide ? launch<256, 256>(t, H, s) : launch<256, 128>(t, H, s); break;
      default: st = wide ? launch<512, 256>(t, H, s) : launch<512, 128>(t, H, s);
    }
    t = SegmentTable{};
    tiles = 0;
    return st;
  };
  for (size_t k = 0; k < segs.size(); ++k) {
    const FlashSegment& g = segs[k];
    if (g.rows == 0) continue;
    const int64_t n_cached = g.cached.to - g.cached.from;
    if (n_cached > 0 && g.cached.to != g.pos0)
      return Status::error(std::string(what) + ": sequence " + std::to_string(k) +
                           ": cached and fresh keys are not contiguous");
    if (g.cached.ring && (g.cached.cap <= 0 || n_cached > g.cached.cap))
      return Status::error(std::string(what) + ": sequence " + std::to_string(k) + ": " + std::to_string(n_cached) +
                           " cached keys do not fit a ring of " + std::to_string(g.cached.cap));
    FlashArgs& a = t.seg[t.n];
    a.q = static_cast<const bf16*>(q) + g.row0 * q_row;
    a.ck = static_cast<const f16*>(g.cached.k);
    a.cv = static_cast<const f16*>(g.cached.v);
    a.kf = static_cast<const f16*>(k_fresh) + g.row0 * kv_row;
    a.vf = static_cast<const f16*>(v_fresh) + g.row0 * kv_row;
    a.out = static_cast<bf16*>(out) + g.row0 * q_row;
    a.cap = g.cached.cap;
    a.slot0 = g.cached.ring ? g.cached.from % g.cached.cap : g.cached.from;
    a.n_cached = n_cached;
    a.n_fresh = g.rows;
    a.rows = g.rows;
    a.q_pos0 = g.pos0;
    a.key_pos0 = n_cached > 0 ? g.cached.from : g.pos0;
    a.window = window;
    a.n_heads = static_cast<int>(shape.n_heads);
    a.n_kv = static_cast<int>(shape.n_kv_heads);
    a.ring = g.cached.ring;
    a.causal = causal;
    t.tile0[t.n++] = tiles;
    tiles += static_cast<int>((g.rows + tile_rows - 1) / tile_rows);
    if (t.n == kMaxSegments)
      if (Status st = flush(); !st.is_ok()) return st;
  }
  return flush();
}

}  // namespace dg
