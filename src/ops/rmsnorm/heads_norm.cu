#include <string>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/rmsnorm/rmsnorm_cuda.h"
#include "ops/rmsnorm/warp_norm.cuh"
#include "ops/rope/span_table.cuh"

namespace dg {
namespace {

constexpr int kWarps = 4;  // warps per block
constexpr int kChunk = 4;  // elements of each half of a head a lane takes per vector: one 8-byte bf16 load

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
  int n_blocks, heads_total, dim, per_warp;  // per_warp divides heads_total: a warp's head rows share one row
  bool any_rope;
  float eps;
  const float* inv_freq;
  const __nv_bfloat162* table;  // rope_table_cuda's [rows][dim / 2], or null: each warp computes its rotation
  SpanTable spans;
};

__device__ __forceinline__ void load4(const cuda::bf16* p, float (&out)[kChunk]) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
  const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
  out[0] = a.x, out[1] = a.y, out[2] = b.x, out[3] = b.y;
}

// Warp g takes head rows per_warp * g .. of the spans' rows (row-major: row spans.row0[0] + i / heads_total, head
// i % heads_total counted across the blocks in order), all of one row. Lane l holds, for each vector v, elements
// j .. j + 3 of each head's first half (j = 4 (l + 32 v)) and their rotation partners j + half .. j + half + 3, so
// the rotation reads no other lane, and the row's rotation pairs (cos and sin of j ..) are read or computed once for
// the warp's heads. kVecs: the vectors a lane takes (head_dim up to 256 kVecs); kMaxP: the most head rows a warp takes.
template <int kVecs, int kMaxP>
__global__ void __launch_bounds__(kWarps * 32) heads_norm_kernel(HeadsArgs a, int warps) {
  cuda::pdl_enter();
  const int g = static_cast<int>(blockIdx.x) * kWarps + static_cast<int>(threadIdx.x >> 5);
  if (g >= warps) return;
  const int lane = static_cast<int>(threadIdx.x & 31), P = a.per_warp, dim = a.dim, half = dim / 2;
  const int flat = g * P, rel = flat / a.heads_total;
  const int64_t row = a.spans.row0[0] + rel;
  int hb[kMaxP], bb[kMaxP];  // each head row's block and head within it
  {
    int h = flat - rel * a.heads_total, b = 0;
    while (h >= a.heads[b]) h -= a.heads[b++];
#pragma unroll
    for (int p = 0; p < kMaxP; ++p) {
      hb[p] = h, bb[p] = b;
      if (p + 1 < P && ++h == a.heads[b]) h = 0, ++b;
    }
  }
  float rc[kVecs][kChunk], rsn[kVecs][kChunk];  // the lane's pairs' rotation (cos, sin), as bf16 values
  if (a.any_rope) {
    const float pos = static_cast<float>(row + a.spans.shift[span_of(a.spans, row)]);
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      const int j0 = kChunk * (lane + 32 * v);
      if (j0 >= half) continue;
      if (a.table != nullptr) {
        const uint4 raw = *reinterpret_cast<const uint4*>(a.table + row * half + j0);
        const __nv_bfloat162* t = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
        for (int i = 0; i < kChunk; ++i) {
          const float2 cs = __bfloat1622float2(t[i]);
          rc[v][i] = cs.x, rsn[v][i] = cs.y;
        }
      } else {
#pragma unroll
        for (int i = 0; i < kChunk; ++i) {
          float sn, c;
          sincosf(pos * a.inv_freq[j0 + i], &sn, &c);
          rc[v][i] = cuda::rbf(c), rsn[v][i] = cuda::rbf(sn);
        }
      }
    }
  }
  // Every head row's values first (the loads of all of them in flight), then each row's norm and rotation.
  float x[kMaxP][kVecs][2][kChunk];
  float ss[kMaxP];
#pragma unroll
  for (int p = 0; p < kMaxP; ++p) {
    ss[p] = 0.0f;
    if (p >= P) continue;
    const int b = bb[p], h = hb[p];
    const cuda::bf16* src = a.src[b] + row * a.ld[b] + h * dim;
    const float* col = a.col_scale[b] != nullptr ? a.col_scale[b] + h * dim : nullptr;
    const float rs = col != nullptr ? a.row_scale[b][row] : 1.0f;
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      const int j0 = kChunk * (lane + 32 * v);
      if (j0 >= half) continue;
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        load4(src + k * half + j0, x[p][v][k]);
        if (col != nullptr) {
          const float4 cs = *reinterpret_cast<const float4*>(col + k * half + j0);
          const float c4[kChunk] = {cs.x, cs.y, cs.z, cs.w};
#pragma unroll
          for (int i = 0; i < kChunk; ++i) x[p][v][k][i] = x[p][v][k][i] * rs * c4[i];
        }
#pragma unroll
        for (int i = 0; i < kChunk; ++i) ss[p] += x[p][v][k][i] * x[p][v][k][i];
      }
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
#pragma unroll
    for (int p = 0; p < kMaxP; ++p) ss[p] += __shfl_xor_sync(0xffffffffu, ss[p], off);
#pragma unroll
  for (int p = 0; p < kMaxP; ++p) {
    if (p >= P) continue;
    const int b = bb[p], h = hb[p];
    const float inv = rsqrtf(ss[p] / static_cast<float>(dim) + a.eps);
    const cuda::bf16* w = a.w[b];
    const bool rope = a.rope[b];
    const int64_t out = (row * a.heads[b] + h) * dim;
#pragma unroll
    for (int v = 0; v < kVecs; ++v) {
      const int j0 = kChunk * (lane + 32 * v);
      if (j0 >= half) continue;
      float n[2][kChunk], y[2][kChunk];
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        float wv[kChunk] = {1.0f, 1.0f, 1.0f, 1.0f};
        if (w != nullptr) load4(w + k * half + j0, wv);
#pragma unroll
        for (int i = 0; i < kChunk; ++i) {
          float t = x[p][v][k][i] * inv;
          if (w != nullptr) t *= wv[i];
          n[k][i] = cuda::rbf(t);
        }
      }
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        if (rope) {
          const float c = rc[v][i], sn = rsn[v][i];
          y[0][i] = cuda::rbf(n[0][i] * c) + cuda::rbf(-n[1][i] * sn);
          y[1][i] = cuda::rbf(n[1][i] * c) + cuda::rbf(n[0][i] * sn);
        } else {
          y[0][i] = n[0][i], y[1][i] = n[1][i];
        }
      }
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const __nv_bfloat162 e0 = __floats2bfloat162_rn(y[k][0], y[k][1]), e1 = __floats2bfloat162_rn(y[k][2], y[k][3]);
        uint2 raw;
        raw.x = *reinterpret_cast<const uint32_t*>(&e0), raw.y = *reinterpret_cast<const uint32_t*>(&e1);
        *reinterpret_cast<uint2*>(a.dst[b] + out + k * half + j0) = raw;
        if (a.dst16[b] != nullptr) {
          const float2 f0 = __bfloat1622float2(e0), f1 = __bfloat1622float2(e1);
          const __half2 h0 = __floats2half2_rn(f0.x, f0.y), h1 = __floats2half2_rn(f1.x, f1.y);
          uint2 raw16;
          raw16.x = *reinterpret_cast<const uint32_t*>(&h0), raw16.y = *reinterpret_cast<const uint32_t*>(&h1);
          *reinterpret_cast<uint2*>(a.dst16[b] + out + k * half + j0) = raw16;
        }
      }
    }
  }
}

template <int kVecs, int kMaxP>
Status launch_heads(const HeadsArgs& a, int warps, cudaStream_t s) {
  const auto blocks = static_cast<unsigned>((static_cast<int64_t>(warps) + kWarps - 1) / kWarps);
  cuda::launch(heads_norm_kernel<kVecs, kMaxP>, blocks, kWarps * 32, 0, s, a, warps);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? Status::ok() : cuda_status(e, "heads_norm_cuda");
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
    a.any_rope = a.any_rope || k.rope;
    a.heads_total += a.heads[b];
  }
  if (Status st = check_spans_cover(spans, n_spans, rows, "heads_norm_cuda"); !st.is_ok()) return st;
  if (!aligned16(rope_table)) return Status::error("heads_norm_cuda: the rotation table must be 16-byte aligned");
  if (rows * a.heads_total > 0x7fffffff)
    return Status::error("heads_norm_cuda: " + std::to_string(rows) + " rows of " + std::to_string(a.heads_total) +
                         " heads pass 2^31 head rows");
  const int vecs = dim <= 256 ? 1 : dim <= 512 ? 2 : 4;
  // Head rows per warp: 4 (2 for head dims above 512) where the row's heads divide by it, else fewer.
  a.per_warp = vecs == 4 ? 2 : 4;
  while (a.heads_total % a.per_warp != 0) a.per_warp /= 2;
  for (int first = 0; first < n_spans; first += kRopeSpansPerLaunch) {
    a.spans = span_table(spans, n_spans, first);
    const int64_t head_rows = (a.spans.row_end[a.spans.n - 1] - a.spans.row0[0]) * a.heads_total;
    if (head_rows == 0) continue;
    const int warps = static_cast<int>(head_rows / a.per_warp);
    const Status st = vecs == 1 ? launch_heads<1, 4>(a, warps, s)
                      : vecs == 2 ? launch_heads<2, 4>(a, warps, s)
                                  : launch_heads<4, 2>(a, warps, s);
    if (!st.is_ok()) return st;
  }
  return Status::ok();
}

}  // namespace dg
