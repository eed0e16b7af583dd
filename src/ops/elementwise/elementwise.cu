#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/elementwise/elementwise.h"
#include "ops/elementwise/synthetic_uniform.h"

namespace dg {
namespace {

using cuda::bf16;
using cuda::f16;

__global__ void add_kernel(const bf16* a, const bf16* b, bf16* out, int64_t n) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16_rn(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}

__global__ void scale_kernel(bf16* x, float s, int64_t n) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = __float2bfloat16_rn(__bfloat162float(x[i]) * s);
}

__global__ void fill_uniform_kernel(bf16* x, int64_t n, uint64_t seed, float scale, float offset) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = __float2bfloat16_rn(synthetic_uniform(seed, static_cast<uint64_t>(i), scale, offset));
}

template <typename S, typename D>
__global__ void convert_kernel(const S* src, D* dst, int64_t n) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) dst[i] = cuda::from_f32<D>(cuda::to_f32(src[i]));
}

// Eight elements per thread, as one aligned load and one aligned store (n a multiple of 8, both ends aligned to
// eight elements): the per-element form left a 256 x 2,048 K/V copy at 4 µs on an H200.
template <typename T>
struct alignas(8 * sizeof(T)) Pack8 {
  T v[8];
};

template <typename S, typename D>
__global__ void convert8_kernel(const Pack8<S>* src, Pack8<D>* dst, int64_t n8) {
  cuda::pdl_enter();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n8) return;
  const Pack8<S> a = src[i];
  Pack8<D> b;
#pragma unroll
  for (int k = 0; k < 8; ++k) b.v[k] = cuda::from_f32<D>(cuda::to_f32(a.v[k]));
  dst[i] = b;
}

template <typename S, typename D>
void launch_convert(const void* src, void* dst, int64_t n, cudaStream_t s) {
  const bool packed = n % 8 == 0 && reinterpret_cast<uintptr_t>(src) % sizeof(Pack8<S>) == 0 &&
                      reinterpret_cast<uintptr_t>(dst) % sizeof(Pack8<D>) == 0;
  if (packed)
    cuda::launch(convert8_kernel<S, D>, cuda::blocks_for(n / 8, 256), 256, 0, s, static_cast<const Pack8<S>*>(src),
                 static_cast<Pack8<D>*>(dst), n / 8);
  else
    cuda::launch(convert_kernel<S, D>, cuda::blocks_for(n, 256), 256, 0, s, static_cast<const S*>(src),
                 static_cast<D*>(dst), n);
}

template <typename S>
Status convert_to(const void* src, void* dst, DType dt, int64_t n, cudaStream_t s) {
  switch (dt) {
    case DType::kBF16: launch_convert<S, bf16>(src, dst, n, s); break;
    case DType::kF16: launch_convert<S, f16>(src, dst, n, s); break;
    case DType::kF32: launch_convert<S, float>(src, dst, n, s); break;
    default: return Status::error("convert_cuda: unsupported destination dtype");
  }
  return cuda_status(cudaGetLastError(), "convert_cuda");
}

struct SplitArgs {
  void* dst[4];
  int64_t begin[5];  // column offsets of the outputs in 16-byte chunks; begin[n] = chunks per row
  int n;
};

// A block per row: output o takes the row's chunks [begin[o], begin[o + 1]) (no division per chunk; a thread per
// chunk with a 64-bit division took 8-10 µs for the 256 x 8,192 q/k/v split on an H200).
__global__ void split_cols_kernel(const uint4* src, SplitArgs a) {
  cuda::pdl_enter();
  const int64_t row = blockIdx.x;
  const uint4* sr = src + row * a.begin[a.n];
  for (int o = 0; o < a.n; ++o) {
    const int64_t b = a.begin[o], w = a.begin[o + 1] - b;
    uint4* d = static_cast<uint4*>(a.dst[o]) + row * w;
    for (int64_t c = threadIdx.x; c < w; c += blockDim.x) d[c] = sr[b + c];
  }
}

// 32 x 32 tiles through shared memory (a padded column keeps the transposed reads free of bank conflicts); block
// (x, y) is the tile of source columns 32x.. and rows 32y.., its 32 x 8 threads four rows each.
__global__ void transpose_kernel(const bf16* src, int64_t rows, int64_t cols, bf16* dst) {
  cuda::pdl_enter();
  __shared__ bf16 tile[32][33];
  const int64_t c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
  for (int i = threadIdx.y; i < 32; i += 8)
    if (r0 + i < rows && c0 + threadIdx.x < cols) tile[i][threadIdx.x] = src[(r0 + i) * cols + c0 + threadIdx.x];
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += 8)
    if (c0 + i < cols && r0 + threadIdx.x < rows) dst[(c0 + i) * rows + r0 + threadIdx.x] = tile[threadIdx.x][i];
}

}  // namespace

Status transpose_cuda(const void* src, int64_t rows, int64_t cols, void* dst, cudaStream_t s) {
  if (rows * cols == 0) return Status::ok();
  if ((rows + 31) / 32 > 65535) return Status::error("transpose_cuda: more than 2,097,120 rows");
  const dim3 grid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>((rows + 31) / 32)), block(32, 8);
  cuda::launch(transpose_kernel, grid, block, 0, s, static_cast<const bf16*>(src), rows, cols, static_cast<bf16*>(dst));
  return cuda_status(cudaGetLastError(), "transpose_cuda");
}

Status add_cuda(const void* a, const void* b, void* out, int64_t n, cudaStream_t s) {
  if (n == 0) return Status::ok();
  cuda::launch(add_kernel, cuda::blocks_for(n, 256), 256, 0, s, static_cast<const bf16*>(a), static_cast<const bf16*>(b),
                                                       static_cast<bf16*>(out), n);
  return cuda_status(cudaGetLastError(), "add_cuda");
}

Status scale_cuda(void* x, float scale, int64_t n, cudaStream_t s) {
  if (n == 0) return Status::ok();
  cuda::launch(scale_kernel, cuda::blocks_for(n, 256), 256, 0, s, static_cast<bf16*>(x), scale, n);
  return cuda_status(cudaGetLastError(), "scale_cuda");
}

Status fill_uniform_cuda(void* x, int64_t n, uint64_t seed, float scale, float offset, cudaStream_t s) {
  if (n == 0) return Status::ok();
  cuda::launch(fill_uniform_kernel, cuda::blocks_for(n, 256), 256, 0, s, static_cast<bf16*>(x), n, seed, scale, offset);
  return cuda_status(cudaGetLastError(), "fill_uniform_cuda");
}

Status convert_cuda(const void* src, DType st, void* dst, DType dt, int64_t n, cudaStream_t s) {
  if (n == 0) return Status::ok();
  switch (st) {
    case DType::kBF16: return convert_to<bf16>(src, dst, dt, n, s);
    case DType::kF16: return convert_to<f16>(src, dst, dt, n, s);
    case DType::kF32: return convert_to<float>(src, dst, dt, n, s);
    default: return Status::error("convert_cuda: unsupported source dtype");
  }
}

Status split_cols_cuda(const void* src, int64_t rows, void* const* dst, const int64_t* widths, int n, cudaStream_t s) {
  if (n < 1 || n > 4) return Status::error("split_cols_cuda: 1 to 4 outputs");
  SplitArgs a{};
  a.n = n;
  for (int i = 0; i < n; ++i) {
    if (widths[i] % 8 != 0) return Status::error("split_cols_cuda: widths must be multiples of 8");
    a.dst[i] = dst[i];
    a.begin[i + 1] = a.begin[i] + widths[i] / 8;
  }
  if (rows == 0 || a.begin[n] == 0) return Status::ok();
  if (rows > 0x7fffffff) return Status::error("split_cols_cuda: too many rows");
  cuda::launch(split_cols_kernel, static_cast<unsigned>(rows), 256, 0, s, static_cast<const uint4*>(src), a);
  return cuda_status(cudaGetLastError(), "split_cols_cuda");
}

}  // namespace dg
