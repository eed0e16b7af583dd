// One warp per (query row, head): the query and the output accumulator live in registers (head_dim / 32 values per
// lane), keys stream from the cache (f16, ring slots) then the fresh rows (bf16); online softmax in f32.
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/attention/attention_cuda.h"

namespace dg {
namespace {

using cuda::bf16;
using cuda::f16;

constexpr int kWarps = 4;

template <int kPerLane>
__global__ void attention_kernel(const bf16* __restrict__ q, int64_t rows, int64_t q_pos0, CachedKv cached,
                                 const bf16* __restrict__ kf, const bf16* __restrict__ vf, int64_t n_fresh,
                                 int64_t fresh_pos0, int64_t n_heads, int64_t n_kv, int64_t D, bool causal,
                                 int64_t window, bf16* __restrict__ out) {
  cuda::pdl_enter();
  const int lane = threadIdx.x & 31;
  const int64_t task = blockIdx.x * static_cast<int64_t>(kWarps) + (threadIdx.x >> 5);
  if (task >= rows * n_heads) return;
  const int64_t r = task / n_heads, h = task % n_heads, kvh = h / (n_heads / n_kv);
  const int64_t qp = q_pos0 + r;
  float qv[kPerLane], acc[kPerLane];
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int64_t d = lane + 32 * i;
    qv[i] = d < D ? __bfloat162float(q[(r * n_heads + h) * D + d]) : 0.0f;
    acc[i] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  const int64_t row_stride = n_kv * D;
  auto visit = [&](int64_t kp, auto load_k, auto load_v) {
    if (causal && (kp > qp || (window > 0 && kp <= qp - window))) return;
    float part = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t d = lane + 32 * i;
      if (d < D) part += qv[i] * load_k(d);
    }
    const float sc = cuda::warp_sum(part);
    const float m_new = fmaxf(m, sc);
    const float corr = expf(m - m_new), p = expf(sc - m_new);
    l = l * corr + p;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int64_t d = lane + 32 * i;
      acc[i] = acc[i] * corr + (d < D ? p * load_v(d) : 0.0f);
    }
    m = m_new;
  };
  const f16* ck = static_cast<const f16*>(cached.k);
  const f16* cv = static_cast<const f16*>(cached.v);
  for (int64_t p = cached.from; p < cached.to; ++p) {
    const int64_t slot = cached.ring ? p % cached.cap : p;
    const f16* kr = ck + slot * row_stride + kvh * D;
    const f16* vr = cv + slot * row_stride + kvh * D;
    visit(p, [&](int64_t d) { return __half2float(kr[d]); }, [&](int64_t d) { return __half2float(vr[d]); });
  }
  for (int64_t j = 0; j < n_fresh; ++j) {
    const bf16* kr = kf + j * row_stride + kvh * D;
    const bf16* vr = vf + j * row_stride + kvh * D;
    visit(fresh_pos0 + j, [&](int64_t d) { return __bfloat162float(kr[d]); },
          [&](int64_t d) { return __bfloat162float(vr[d]); });
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int64_t d = lane + 32 * i;
    if (d < D) out[r * n_heads * D + h * D + d] = __float2bfloat16_rn(acc[i] * inv);
  }
}

__global__ void kv_write_kernel(const bf16* k, const bf16* v, int64_t n, int64_t row_elems, int64_t pos0, f16* ck,
                                f16* cv, int64_t cap, bool ring) {
  cuda::pdl_enter();
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= n * row_elems) return;
  const int64_t i = t / row_elems, e = t % row_elems;
  if (ring && i < n - cap) return;  // overwritten by a later row of the same chunk
  const int64_t slot = ring ? (pos0 + i) % cap : pos0 + i;
  ck[slot * row_elems + e] = __float2half_rn(__bfloat162float(k[t]));
  cv[slot * row_elems + e] = __float2half_rn(__bfloat162float(v[t]));
}

}  // namespace

Status attention_cuda(const void* q, int64_t rows, int64_t q_pos0, const CachedKv& cached, const void* k_fresh,
                      const void* v_fresh, int64_t n_fresh, int64_t fresh_pos0, const AttnShape& sh, bool causal,
                      int64_t window, void* out, cudaStream_t s) {
  if (rows == 0) return Status::ok();
  if (sh.head_dim > 512) return Status::error("attention_cuda: head_dim above 512 is not supported");
  if (sh.n_kv_heads <= 0 || sh.n_heads % sh.n_kv_heads != 0) return Status::error("attention_cuda: bad GQA shape");
  const unsigned grid = cuda::blocks_for(rows * sh.n_heads, kWarps);
  const auto* qq = static_cast<const bf16*>(q);
  const auto* kf = static_cast<const bf16*>(k_fresh);
  const auto* vf = static_cast<const bf16*>(v_fresh);
  auto* o = static_cast<bf16*>(out);
#define DG_ATTN(N)                                                                                                 \
  cuda::launch(attention_kernel<N>, grid, kWarps * 32, 0, s, qq, rows, q_pos0, cached, kf, vf, n_fresh, fresh_pos0,          \
                                                   sh.n_heads, sh.n_kv_heads, sh.head_dim, causal, window, o)
  if (sh.head_dim <= 32) {
    DG_ATTN(1);
  } else if (sh.head_dim <= 64) {
    DG_ATTN(2);
  } else if (sh.head_dim <= 128) {
    DG_ATTN(4);
  } else if (sh.head_dim <= 256) {
    DG_ATTN(8);
  } else {
    DG_ATTN(16);
  }
#undef DG_ATTN
  return cuda_status(cudaGetLastError(), "attention_cuda");
}

Status kv_write_cuda(const void* k, const void* v, int64_t n, int64_t row_elems, int64_t pos0, void* cache_k,
                     void* cache_v, int64_t cap, bool ring, cudaStream_t s) {
  if (n == 0) return Status::ok();
  cuda::launch(kv_write_kernel, cuda::blocks_for(n * row_elems, 256), 256, 0, s, 
      static_cast<const bf16*>(k), static_cast<const bf16*>(v), n, row_elems, pos0, static_cast<f16*>(cache_k),
      static_cast<f16*>(cache_v), cap, ring);
  return cuda_status(cudaGetLastError(), "kv_write_cuda");
}

}  // namespace dg
