// The CUDA backend's MoE block: the router (norm, prep, the cuBLAS product), routing and the stable grouping by
// expert, the expert products in the kernel the options pick (the streaming kernel: W8A8, packed or bf16; cuBLAS's
// grouped GEMM outside graph captures for large calls; the wmma kernel for shapes the streaming kernel does not
// take), and the weighted combine. CPU twin: the CPU backend's moe() (moe_route_cpu, moe_experts_cpu).
#pragma once

#include <functional>

#include "backend/backend.h"
#include "backend/cuda/cublas_paths.h"
#include "backend/cuda/cuda_kernels.h"
#include "core/tensor.h"
#include "ops/moe/moe.h"
#include "ops/moe/moe_cuda.h"
#include "ops/residual/residual.h"

namespace dg {

struct MoePathCtx {
  CublasCtx blas;  // the handle, the stream and its stream-ordered buffers
  const CudaKernels& kernels;
  float eps;        // the norms' (the router's, the tail's)
  bool capturing;   // inside a graph capture: no host synchronisation (the cuBLAS path is off)
  WeightLayout q4;      // where q4 expert weights are in the kernel layout
  std::function<void(const char*)> stage;  // the backend's profiling mark ("moe_experts", "moe")
  unsigned* route_ticket = nullptr;  // the backend's, for routing and grouping in one launch (moe_route_group_cuda)
  const MoeInputs* inputs = nullptr;  // the router's input and z's codes from the residual chain, where filled
  cudaEvent_t routed = nullptr;  // inputs->routing issued ahead (moe_route_ahead): its join, waited for before use
};

// A routing's buffers for T rows of E experts (from `device`, the backend's allocations on its main stream, made
// before any other stream uses them): scratch only where routing and grouping run as one launch (a ticket,
// k.moe_route_fused, moe_route_group_takes).
void moe_route_buffers(const std::function<Tensor(DType, Shape)>& device, const CudaKernels& k, unsigned* ticket,
                       int64_t T, int64_t E, int top_k, MoeRouting& g);
// The router's product of r [T, H] through `blas` on its stream s, each row's top-k experts and weights, and the
// (row, rank) pairs grouped by expert, into g's buffers (moe_route_buffers with the same k and ticket): one launch
// with scratch (moe_route_group_cuda), else moe_route_cuda and moe_group_cuda.
void moe_route_rows(cublasHandle_t blas, cudaStream_t s, const CudaKernels& k, unsigned* ticket, const Tensor& r,
                    const MoeWeights& w, int top_k, MoeRouting& g);

// Whether moe_cuda_path runs T rows of these experts through moe_a8_stream_products in passes of 64 rows (W8A8
// experts, calls below moe_auto_rows tokens with --moe auto, or --moe stream): what may be issued with the routing.
bool moe_a8_streams(const CudaKernels& k, const MoeWeights& w, int64_t T);
// The W8A8 expert products in the streaming kernel on stream s: z's E4M3 rows zq/zs [T, H] gathered by g's grouping,
// the gated rows quantised between the products, into y [P + 16, H]; act [P, ff] bf16, aq [P, ff] and as [P] hold
// the gated rows and their codes. wide: passes of 128 rows.
void moe_a8_stream_products(const CudaKernels& k, cudaStream_t s, const Tensor& zq, const Tensor& zs,
                            const MoeRouting& g, const MoeWeights& w, int top_k, bool wide, Tensor& act, Tensor& aq,
                            Tensor& as, Tensor& y);

// Whether a q4 weight of shape s is tiled at upload (q4_to_tiled_layout_cuda): experts (rank 3) the warp-specialised
// kernel takes, in the kernel layout, with kernels.q4_tiles and a --moe choice that runs that kernel (auto, ws).
bool q4_tiled_experts(const CudaKernels& kernels, const Shape& s);
// Whether an fp8 or bf16 weight of shape s is tiled at upload (to_row_tiles_cuda): experts (rank 3) whose rows allow
// it (row_tiles_ok), fp8 with kernels.fp8_tiles (every expert kernel that takes fp8 weights reads tiles), bf16 with
// kernels.bf16_tiles and a --moe choice whose kernels read them (auto, stream, wide, ws; not cublas or wmma).
bool row_tiled_experts(const CudaKernels& kernels, DType dtype, const Shape& s);

// The feed-forward tail that takes the MoE block's output as its m2 (Backend::moe_ffn_tail): out = ffn_tail(h, m1,
// w1, moe, w2, w, scalar), the experts' rows combined inside the tail's kernel (ffn_tail_moe_cuda).
struct MoeTail {
  const Tensor& m1;
  const Tensor& w1;
  const Tensor& w2;
  const Tensor& w;
  RowScalar scalar;
  RawRowScales m1_raw = {};  // m1 holds a W8A8 product's raw sums: their scales, applied as the tail reads them
  NextNormOut next = {};     // the next layer's input norm of out, written by the tail's launch (or none)
};

// out[T, H] = the MoE block of h (router input) and z (expert input), bf16 [T, H] each; with `tail`, out is the
// feed-forward tail of it instead (where ffn_tail_moe_fits; else the combine, then ffn_tail_cuda).
void moe_cuda_path(const MoePathCtx& c, const Tensor& h, const Tensor& z, const MoeWeights& w, int top_k,
                   Tensor& out, const MoeTail* tail = nullptr);

}  // namespace dg
