#include <cstdint>
#include <string>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/rope/rope_cuda.h"
#include "ops/rope/span_table.cuh"

namespace dg {
namespace {

using cuda::rbf;

// Rotates pair i of the head at v (elements i and i + half) by the angle of position `pos`, rounded as rope.h says.
__device__ __forceinline__ void rotate_pair(cuda::bf16* v, int64_t i, int64_t half, int64_t pos,
                                            const float* inv_freq) {
  const float ang = static_cast<float>(pos) * inv_freq[i];
  const float c = rbf(cosf(ang)), sn = rbf(sinf(ang));
  const float a = __bfloat162float(v[i]), b = __bfloat162float(v[i + half]);
  v[i] = __float2bfloat16_rn(rbf(a * c) + rbf(-b * sn));
  v[i + half] = __float2bfloat16_rn(rbf(b * c) + rbf(a * sn));
}

__global__ void rope_kernel(cuda::bf16* x, int64_t heads, int64_t head_dim, int64_t pos0, const float* inv_freq,
                            int64_t total) {
  cuda::pdl_enter();
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;  // over rows * heads * half
  if (t >= total) return;
  const int64_t half = head_dim / 2;
  const int64_t i = t % half, rh = t / half, row = rh / heads;
  rotate_pair(x + rh * head_dim, i, half, pos0 + row, inv_freq);
}

// Several spans of rows in one launch (span_table.cuh); rows of no span are left alone.
__global__ void rope_spans_kernel(cuda::bf16* x, int64_t heads, int64_t head_dim, const float* inv_freq,
                                  int64_t first_row, int64_t total, SpanTable spans) {
  cuda::pdl_enter();
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;  // over rows * heads * half
  if (t >= total) return;
  const int64_t half = head_dim / 2;
  const int64_t i = t % half, rh = first_row * heads + t / half, row = rh / heads;
  const int s = span_of(spans, row);
  if (s < 0) return;
  rotate_pair(x + rh * head_dim, i, half, row + spans.shift[s], inv_freq);
}

// Thread t: row first_row + t / half, pair t % half of the table (rope_table_cuda).
__global__ void rope_table_kernel(const float* inv_freq, int64_t half, int64_t first_row, int64_t total,
                                  SpanTable spans, __nv_bfloat162* table) {
  cuda::pdl_enter();
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;  // over the launch's rows * half
  if (t >= total) return;
  const int64_t row = first_row + t / half, j = t % half;
  const int s = span_of(spans, row);
  float sn, c;
  sincosf(static_cast<float>(row + spans.shift[s]) * inv_freq[j], &sn, &c);
  table[row * half + j] = __floats2bfloat162_rn(c, sn);
}

}  // namespace

Status rope_table_cuda(const RopeSpan* spans, int n_spans, int64_t rows, int64_t half, const float* inv_freq,
                       void* table, cudaStream_t s) {
  if (half < 1) return Status::error("rope_table_cuda: no rotated pairs (half " + std::to_string(half) + ")");
  if (Status st = check_spans_cover(spans, n_spans, rows, "rope_table_cuda"); !st.is_ok()) return st;
  for (int first = 0; first < n_spans; first += kRopeSpansPerLaunch) {
    const SpanTable t = span_table(spans, n_spans, first);
    const int64_t total = (t.row_end[t.n - 1] - t.row0[0]) * half;
    if (total == 0) continue;
    cuda::launch(rope_table_kernel, cuda::blocks_for(total, 256), 256, 0, s, inv_freq, half, t.row0[0], total, t,
                 static_cast<__nv_bfloat162*>(table));
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return cuda_status(e, "rope_table_cuda");
  }
  return Status::ok();
}

Status rope_spans_cuda(void* x, int64_t rows, int64_t heads, int64_t head_dim, const RopeSpan* spans, int n_spans,
                       const float* inv_freq, cudaStream_t s) {
  int64_t end = 0;
  for (int k = 0; k < n_spans; ++k) {
    const RopeSpan& sp = spans[k];
    if (sp.rows < 0 || sp.row0 < end || sp.row0 + sp.rows > rows)
      return Status::error("rope_spans_cuda: spans must lie within the tensor's " + std::to_string(rows) +
                           " rows, in row order, not overlapping (span " + std::to_string(k) + ")");
    end = sp.row0 + sp.rows;
  }
  for (int b = 0; b < n_spans; b += kRopeSpansPerLaunch) {
    const SpanTable t = span_table(spans, n_spans, b);
    const int64_t lo = t.row0[0], total = (t.row_end[t.n - 1] - lo) * heads * (head_dim / 2);
    if (total <= 0) continue;
    cuda::launch(rope_spans_kernel, cuda::blocks_for(total, 256), 256, 0, s, static_cast<cuda::bf16*>(x), heads,
                 head_dim, inv_freq, lo, total, t);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return cuda_status(e, "rope_spans_cuda");
  }
  return Status::ok();
}

Status rope_cuda(void* x, int64_t rows, int64_t heads, int64_t head_dim, int64_t pos0, const float* inv_freq,
                 cudaStream_t s) {
  const int64_t total = rows * heads * (head_dim / 2);
  if (total == 0) return Status::ok();
  cuda::launch(rope_kernel, cuda::blocks_for(total, 256), 256, 0, s, static_cast<cuda::bf16*>(x), heads, head_dim, pos0,
                                                           inv_freq, total);
  return cuda_status(cudaGetLastError(), "rope_cuda");
}

}  // namespace dg
