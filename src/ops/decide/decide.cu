// The decide op on the GPU: one block of one thread per row. The entropy order is each row's rank (entropies
// below it, ties by index: a stable sort); the f32 cumsum of the accept and the f64 entropy sum then run in one
// thread in the CPU twin's order, and the stop rule is decide_rule.h's, so the decisions match the twin bit for bit.
#include "core/cuda/cuda_check.h"
#include "core/cuda/launch.cuh"
#include "ops/decide/decide_cuda.h"
#include "ops/decide/decide_rule.h"

namespace dg {
namespace {

constexpr int kMaxRows = 1024;

__global__ void decide_start_kernel(DecideParams p, uint64_t lcg, DecideBuffers b) {
  cuda::pdl_enter();
  const int64_t n = static_cast<int64_t>(p.history) * p.rows;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) b.history[i] = -1;
  for (int i = threadIdx.x; i < p.rows; i += blockDim.x) b.prev_accept[i] = 0;
  if (threadIdx.x == 0) {
    *b.state = DecideState{};
    b.state->lcg = lcg;
  }
}

__global__ void decide_uniforms_kernel(DecideParams p, DecideBuffers b, double* u) {
  cuda::pdl_enter();
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < p.rows) u[r] = lcg_uniform(lcg_draw(b.jump[r], b.state->lcg));
}

__global__ void decide_kernel(DecideParams p, DecideBuffers b, const RowStats* stats, const int32_t* drawn,
                              int32_t* canvas, DecideStatus* status) {
  cuda::pdl_enter();
  extern __shared__ unsigned char smem[];
  float* entropy = reinterpret_cast<float*>(smem);               // [rows]
  int32_t* order = reinterpret_cast<int32_t*>(entropy + p.rows);  // [rows]
  uint8_t* accept = reinterpret_cast<uint8_t*>(order + p.rows);   // [rows]
  __shared__ DecideState st;
  const int r = threadIdx.x;
  const bool live = r < p.rows;
  if (r == 0) st = *b.state;
  float h = 0.0f;
  int32_t am = -1;
  if (live) {
    h = stats[r].entropy;
    am = stats[r].argmax;
    entropy[r] = h;
    order[r] = r;  // every slot valid even if a NaN entropy leaves a rank unclaimed
  }
  __syncthreads();
  bool stable_r = true;
  int rank = 0;
  if (live) {
    for (int k = 0; k < p.history; ++k) stable_r = stable_r && b.history[static_cast<int64_t>(k) * p.rows + r] == am;
    for (int j = 0; j < p.rows; ++j) {
      const float hj = entropy[j];
      rank += (hj < h || (hj == h && j < r)) ? 1 : 0;
    }
  }
  __syncthreads();
  if (live) order[rank] = r;
  const bool stable = __syncthreads_and(stable_r) != 0;
  const bool all_pad = __syncthreads_and(!live || am == p.pad_gate_id) != 0;
  if (r == 0) decide_accept_sorted(entropy, order, p.rows, p.bound, accept);
  __syncthreads();
  const int32_t noise0 = p.categorical ? p.rows : 0;  // the uniforms came first
  bool same_r = true;
  int a = 0;
  if (live) {
    a = accept[r];
    const int32_t noise = lcg_randint(lcg_draw(b.jump[noise0 + r], st.lcg), p.vocab);
    canvas[r] = a ? (p.categorical ? drawn[r] : am) : noise;
    same_r = b.prev_accept[r] == a;
    b.prev_accept[r] = static_cast<uint8_t>(a);
    if (p.history > 0) b.history[static_cast<int64_t>(st.history_next) * p.rows + r] = am;
  }
  const bool same = __syncthreads_and(same_r) != 0 && st.has_prev != 0;
  const int accepted = __syncthreads_count(live && a != 0);
  if (r == 0) {
    double h_sum = 0.0;
    for (int i = 0; i < p.rows; ++i) h_sum += entropy[i];
    if (p.history > 0) st.history_next = (st.history_next + 1) % p.history;
    st.has_prev = 1;
    const LcgJump all = b.jump[noise0 + p.rows - 1];  // past every draw of the step
    st.lcg = all.mul * st.lcg + all.add;
    ++st.step;
    const float mean = static_cast<float>(h_sum / p.rows);
    const int32_t rule = decide_stop_rule(p, st, stable, same, all_pad, mean, st.step);
    *b.state = st;
    *status = DecideStatus{st.lcg, rule, accepted, mean, st.step, st.pad_gated, 0};
  }
}

Status check_params(const DecideParams& p, const DecideBuffers& b) {
  if (p.rows < 1 || p.rows > kMaxRows) return Status::error("decide_cuda: rows must be in [1, 1024]");
  if (p.vocab < 1 || p.history < 0) return Status::error("decide_cuda: bad vocabulary or history size");
  if (b.state == nullptr || b.prev_accept == nullptr || b.jump == nullptr || (p.history > 0 && b.history == nullptr))
    return Status::error("decide_cuda: missing buffers");
  return Status::ok();
}

}  // namespace

Status decide_start_cuda(const DecideParams& p, uint64_t lcg, const DecideBuffers& b, cudaStream_t s) {
  if (Status e = check_params(p, b); !e.is_ok()) return e;
  cuda::launch(decide_start_kernel, 1, 256, 0, s, p, lcg, b);
  return cuda_status(cudaGetLastError(), "decide_start_cuda");
}

Status decide_uniforms_cuda(const DecideParams& p, const DecideBuffers& b, double* u, cudaStream_t s) {
  if (Status e = check_params(p, b); !e.is_ok()) return e;
  cuda::launch(decide_uniforms_kernel, static_cast<unsigned>((p.rows + 255) / 256), 256, 0, s, p, b, u);
  return cuda_status(cudaGetLastError(), "decide_uniforms_cuda");
}

Status decide_cuda(const DecideParams& p, const DecideBuffers& b, const RowStats* stats, const int32_t* drawn,
                   int32_t* canvas, DecideStatus* status, cudaStream_t s) {
  if (Status e = check_params(p, b); !e.is_ok()) return e;
  if (p.categorical && drawn == nullptr) return Status::error("decide_cuda: categorical draws need the drawn ids");
  const unsigned threads = static_cast<unsigned>((p.rows + 31) / 32 * 32);
  const size_t shared = static_cast<size_t>(p.rows) * 9;
  cuda::launch(decide_kernel, 1, threads, shared, s, p, b, stats, drawn, canvas, status);
  return cuda_status(cudaGetLastError(), "decide_cuda");
}

}  // namespace dg
