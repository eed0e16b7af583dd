#include <string>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/rmsnorm/rmsnorm_cuda.h"
#include "ops/rmsnorm/warp_norm.cuh"
#include "ops/rope/span_table.cuh"

namespace dg {
namespace {

constexpr int kWarps = 8;  // head rows per block

// The launch's blocks of heads and its spans of rows (in the kernel's parameters; span_table.cuh).
struct HeadsArgs {
  const cuda::bf16* src[kHeadsBlocksMax];
  const cuda::bf16* w[kHeadsBlocksMax];
  cuda::bf16* dst[kHeadsBlocksMax];
  __half* dst16[kHeadsBlocksMax];
  const float* row_scale[kHeadsBlocksMax];
  const float* col_scale[kHeadsBlocksMax];
  int64_t ld[kHeadsBlocksMax];
  int heads[kHeadsBlocksMax];
  bool rope[kHeadsBlocksMax];
  int n_blocks, heads_total, dim;
  float eps;
  const float* inv_freq;
  const __nv_bfloat162* table;  // rope_table_cuda's [rows][dim / 2], or null: each warp computes its rotation
  SpanTable spans;
};

// Warp g takes head row g of the spans' rows: row spans.row0[0] + g / heads_total, head g % heads_total counted
// across the blocks in order.
__global__ void __launch_bounds__(kWarps * 32) heads_norm_kernel(HeadsArgs a, int64_t warps) {
  cuda::pdl_enter();
  __shared__ float normed[kWarps][norm::kWarpMaxDim];
  const int wi = threadIdx.x >> 5;
  const int64_t g = blockIdx.x * static_cast<int64_t>(kWarps) + wi;
  if (g >= warps) return;
  const int64_t row = a.spans.row0[0] + g / a.heads_total;
  int h = static_cast<int>(g % a.heads_total), b = 0;
  while (h >= a.heads[b]) h -= a.heads[b++];
  const int s = span_of(a.spans, row);  // every row has one: the spans cover the rows without gaps
  const int64_t dim = a.dim;
  const float pos = static_cast<float>(row + a.spans.shift[s]);
  const int64_t out = (row * a.heads[b] + h) * dim;
  const norm::RawScales raw{a.col_scale[b] != nullptr ? a.row_scale[b][row] : 1.0f,
                            a.col_scale[b] != nullptr ? a.col_scale[b] + h * dim : nullptr};
  norm::warp_norm_row<true>(a.src[b] + row * a.ld[b] + h * dim, a.w[b], a.dst[b] + out, a.dim, a.eps, a.rope[b], pos,
                            a.inv_freq, normed[wi], a.table != nullptr ? a.table + row * (dim / 2) : nullptr,
                            a.dst16[b] != nullptr ? a.dst16[b] + out : nullptr, raw);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

}  // namespace

Status heads_norm_cuda(const HeadsBlock* blocks, int n_blocks, int64_t rows, int64_t dim, float eps,
                       const RopeSpan* spans, int n_spans, const float* inv_freq, cudaStream_t s,
                       const void* rope_table) {
  if (n_blocks < 1 || n_blocks > kHeadsBlocksMax) return Status::error("heads_norm_cuda: 1 to 3 blocks of heads");
  if (dim % 16 != 0 || dim > norm::kWarpMaxDim)
    return Status::error("heads_norm_cuda: head_dim " + std::to_string(dim) + " must be a multiple of 16 up to " +
                         std::to_string(norm::kWarpMaxDim));
  HeadsArgs a{};
  a.n_blocks = n_blocks;
  a.dim = static_cast<int>(dim);
  a.eps = eps;
  a.inv_freq = inv_freq;
  a.table = static_cast<const __nv_bfloat162*>(rope_table);
  for (int b = 0; b < n_blocks; ++b) {
    const HeadsBlock& k = blocks[b];
    if (k.heads < 1 || k.ld < k.heads * dim || k.ld % 8 != 0 || !aligned16(k.src) || !aligned16(k.dst) ||
        !aligned16(k.w) || !aligned16(k.dst16) || !aligned16(k.col_scale) ||
        (k.col_scale != nullptr && k.row_scale == nullptr))
      return Status::error("heads_norm_cuda: block " + std::to_string(b) +
                           " needs heads >= 1, a row stride >= heads x head_dim and a multiple of 8, 16-byte aligned "
                           "pointers, and row scales with its column scales");
    a.src[b] = static_cast<const cuda::bf16*>(k.src);
    a.w[b] = static_cast<const cuda::bf16*>(k.w);
    a.dst[b] = static_cast<cuda::bf16*>(k.dst);
    a.dst16[b] = static_cast<__half*>(k.dst16);
    a.row_scale[b] = k.row_scale;
    a.col_scale[b] = k.col_scale;
    a.ld[b] = k.ld;
    a.heads[b] = static_cast<int>(k.heads);
    a.rope[b] = k.rope;
    a.heads_total += a.heads[b];
  }
  if (Status st = check_spans_cover(spans, n_spans, rows, "heads_norm_cuda"); !st.is_ok()) return st;
  for (int first = 0; first < n_spans; first += kRopeSpansPerLaunch) {
    a.spans = span_table(spans, n_spans, first);
    const int64_t warps = (a.spans.row_end[a.spans.n - 1] - a.spans.row0[0]) * a.heads_total;
    if (warps == 0) continue;
    if ((warps + kWarps - 1) / kWarps > 0x7fffffff) return Status::error("heads_norm_cuda: too many rows");
    cuda::launch(heads_norm_kernel, static_cast<unsigned>((warps + kWarps - 1) / kWarps), kWarps * 32, 0, s, a, warps);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return cuda_status(e, "heads_norm_cuda");
  }
  return Status::ok();
}

}  // namespace dg
