// The survivor self-conditioning on the GPU (self_cond_cuda.h: soft_survivors_cuda, soft_gather_cuda): the tokens
// of each row within cutoff * p_max listed by one pass over the tempered logits, then a block per row summing their
// embedding rows, instead of the probabilities' pass and the product over the whole vocabulary.
// Reference: soft_embed_cpu with a bf16 table and a cutoff (src/ops/self_cond/self_cond_cpu.cpp).
#include <climits>
#include <string>

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_common.cuh"
#include "core/cuda/launch.cuh"
#include "ops/self_cond/self_cond_cuda.h"
#include "ops/self_cond/soft_slices.cuh"

namespace dg {
namespace {

using cuda::bf16;
using soft::kThreads;
using soft::MaxSum;

// Slice blockIdx.y of row blockIdx.x, each warp over its steps of 32 x 8 entries: a warp's survivors of one step take
// consecutive slots from one atomicAdd on the row's count (their order in the list is not fixed; the gather sorts
// them). A warp stops once the count passes cap: the row overflowed, and count[rows] says so.
__global__ void __launch_bounds__(kThreads) survivors_kernel(const bf16* x, int64_t rows, int64_t vocab, int64_t slice,
                                                              const MaxSum* part, float cutoff, int cap, int32_t* idx,
                                                              float* p, int32_t* count) {
  cuda::pdl_enter();
  __shared__ MaxSum row_shared;
  const MaxSum st = soft::row_stat(part, row_shared);
  const float mx = st.m, inv = 1.0f / st.s, floor = cutoff * inv;  // p_max = 1 / sum
  const int64_t r = blockIdx.x;
  const bf16* row = x + r * vocab;
  const int64_t v0 = blockIdx.y * slice, v1 = v0 + slice < vocab ? v0 + slice : vocab;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const bool vec = vocab % 8 == 0;  // then slices end on multiples of 8 and rows stay 16-byte aligned
  int32_t* ri = idx + r * cap;
  float* rp = p + r * cap;
  for (int64_t base = v0 + 8 * 32 * warp; base < v1; base += 8 * kThreads) {  // the same trip count in every lane
    const int64_t v = base + 8 * lane;
    float pr[8];
    unsigned mine = 0;
    if (v < v1) {
      uint4 raw;
      bf16* e = reinterpret_cast<bf16*>(&raw);
      if (vec) {
        raw = *reinterpret_cast<const uint4*>(row + v);
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) e[i] = v + i < v1 ? row[v + i] : __float2bfloat16_rn(-INFINITY);
      }
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        pr[i] = soft::prob(e[i], mx, inv);
        if (pr[i] != 0.0f && pr[i] >= floor) mine |= 1u << i;
      }
    }
    const int n = __popc(mine);
    int incl = n;
    for (int o = 1; o < 32; o <<= 1) {
      const int t = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += t;
    }
    const int total = __shfl_sync(0xffffffffu, incl, 31);
    if (total == 0) continue;
    int at = 0;
    if (lane == 0) at = atomicAdd(count + r, total);
    at = __shfl_sync(0xffffffffu, at, 0);
    int slot = at + incl - n;
    for (int i = 0; i < 8; ++i)
      if (mine >> i & 1u) {
        if (slot < cap) {
          ri[slot] = static_cast<int32_t>(v + i);
          rp[slot] = pr[i];
        }
        ++slot;
      }
    if (at + total > cap) {  // warp-uniform: the row overflowed
      if (lane == 0) count[rows] = 1;
      break;
    }
  }
}

// One block per row: its survivors sorted by token (a bitonic sort in shared memory, padded to a power of two), then
// thread t sums the 8-column chunks t, t + 256, ... of their rows in that order, four rows' loads in flight. With
// set_overflow (inside a capture) block 0 also sets `overflow` to the flag count[rows], for the branch that takes
// the product.
__global__ void __launch_bounds__(kThreads) gather_kernel(const int32_t* idx, const float* p, const int32_t* count,
                                                           int cap, int pow2, const bf16* table, int64_t hidden,
                                                           bf16* out, cudaGraphConditionalHandle overflow,
                                                           bool set_overflow) {
  cuda::pdl_enter();
  if (set_overflow && blockIdx.x == 0 && threadIdx.x == 0) cudaGraphSetConditional(overflow, count[gridDim.x] != 0);
  extern __shared__ int32_t gs[];  // [pow2] tokens, then [pow2] probabilities
  int32_t* key = gs;
  float* val = reinterpret_cast<float*>(gs + pow2);
  const int64_t r = blockIdx.x;
  const int n = count[r];
  if (n > cap) return;  // overflowed: the caller takes the dense product for the call
  int n2 = 1;
  while (n2 < n) n2 <<= 1;
  for (int i = threadIdx.x; i < n2; i += kThreads) {
    key[i] = i < n ? idx[r * cap + i] : INT_MAX;
    val[i] = i < n ? p[r * cap + i] : 0.0f;
  }
  __syncthreads();
  for (int k = 2; k <= n2; k <<= 1)
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < n2; i += kThreads) {
        const int l = i ^ j;
        if (l > i && (key[i] > key[l]) == ((i & k) == 0)) {
          const int32_t tk = key[i];
          key[i] = key[l];
          key[l] = tk;
          const float tv = val[i];
          val[i] = val[l];
          val[l] = tv;
        }
      }
      __syncthreads();
    }
  const int64_t chunks = hidden / 8;
  for (int64_t c = threadIdx.x; c < chunks; c += kThreads) {
    float acc[8] = {};
    auto add = [&](uint4 raw, float w) {
      const bf16* e = reinterpret_cast<const bf16*>(&raw);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] = fmaf(w, __bfloat162float(e[j]), acc[j]);
    };
    int i = 0;
    for (; i + 4 <= n; i += 4) {
      uint4 q[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) q[k] = *reinterpret_cast<const uint4*>(table + key[i + k] * hidden + 8 * c);
#pragma unroll
      for (int k = 0; k < 4; ++k) add(q[k], val[i + k]);
    }
    for (; i < n; ++i) add(*reinterpret_cast<const uint4*>(table + key[i] * hidden + 8 * c), val[i]);
    uint4 o;
    bf16* oe = reinterpret_cast<bf16*>(&o);
#pragma unroll
    for (int j = 0; j < 8; ++j) oe[j] = __float2bfloat16_rn(acc[j]);
    *reinterpret_cast<uint4*>(out + r * hidden + 8 * c) = o;
  }
}

}  // namespace

Status soft_survivors_cuda(const void* logits, int64_t rows, int64_t vocab, float cutoff, const void* scratch,
                           int cap, int32_t* idx, float* p, int32_t* count, cudaStream_t s) {
  if (!(cutoff > 0.0f && cutoff < 1.0f)) return Status::error("soft_survivors_cuda: the cutoff must lie in (0, 1)");
  if (cap < 1 || cap > kSurvivorCapMax)
    return Status::error("soft_survivors_cuda: a cap of 1 to " + std::to_string(kSurvivorCapMax) + " survivors");
  if (rows == 0) return Status::ok();
  if (rows > 0x7fffffff) return Status::error("soft_survivors_cuda: too many rows");
  const soft::Slices sl = soft::slices(rows, vocab);
  cuda::launch(survivors_kernel, sl.grid, kThreads, 0, s, static_cast<const bf16*>(logits), rows, vocab, sl.slice,
               static_cast<const MaxSum*>(scratch), cutoff, cap, idx, p, count);
  return cuda_status(cudaGetLastError(), "soft_survivors_cuda");
}

Status soft_gather_cuda(const int32_t* idx, const float* p, const int32_t* count, int64_t rows, int cap,
                        const void* table, int64_t hidden, void* out, cudaStream_t s,
                        const cudaGraphConditionalHandle* overflow) {
  if (cap < 1 || cap > kSurvivorCapMax)
    return Status::error("soft_gather_cuda: a cap of 1 to " + std::to_string(kSurvivorCapMax) + " survivors");
  if (hidden % 8 != 0 || (reinterpret_cast<uintptr_t>(table) | reinterpret_cast<uintptr_t>(out)) % 16 != 0)
    return Status::error("soft_gather_cuda: the hidden size must be a multiple of 8 and the rows 16-byte aligned");
  if (rows == 0) return Status::ok();  // a condition keeps its launch value, 0
  if (rows > 0x7fffffff) return Status::error("soft_gather_cuda: too many rows");
  int pow2 = 1;
  while (pow2 < cap) pow2 <<= 1;
  const size_t smem = static_cast<size_t>(pow2) * (sizeof(int32_t) + sizeof(float));
  cuda::launch(gather_kernel, static_cast<unsigned>(rows), kThreads, smem, s, idx, p, count, cap, pow2,
               static_cast<const bf16*>(table), hidden, static_cast<bf16*>(out),
               overflow != nullptr ? *overflow : cudaGraphConditionalHandle{}, overflow != nullptr);
  return cuda_status(cudaGetLastError(), "soft_gather_cuda");
}

}  // namespace dg
