// The CUDA backend: bf16 activations and weights (or a pack's packed bytes, run by the streaming kernel), an f16 KV
// cache, f32 logits. Dense bf16 products go through cuBLAS (bf16 in, f32 accumulate); everything else is our
// kernels in src/ops/*/*.cu. Buffers come from the stream-ordered allocator, so per-op allocations reuse memory
// without synchronising. This file: construction, memory, graphs and sampling; the forward ops:
// cuda_backend_ops.cpp.
#include "backend/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_profiler_api.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_decider.h"
#include "backend/cuda/host_check.h"
#include "backend/cuda/moe_path.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/pdl.h"
#include "core/error.h"
#include "ops/attention/attention_cuda.h"
#include "ops/elementwise/elementwise.h"
#include "ops/moe/moe_cuda.h"
#include "ops/moe/q4_layout.h"
#include "ops/row_stats/row_stats_cuda.h"

namespace dg {
namespace {

using cuda_host::check;

}  // namespace

CudaBackend::CudaBackend(float eps, int device, const CudaKernels& kernels, bool linear_act8)
    : eps_(eps), kernels_(kernels), linear_act8_(linear_act8), ctx_(std::make_shared<StreamCtx>()) {
  check_kernels(kernels);
  const int n = cuda_device_count();
  DG_CHECK(n > 0, "the CUDA backend needs an NVIDIA GPU, and none is visible (use --backend cpu)");
  DG_CHECK(device >= 0 && device < n, "CUDA device {} does not exist ({} visible)", device, n);
  check(cudaSetDevice(device), "cudaSetDevice");
  cuda::set_pdl(kernels.pdl);  // process-wide: the kernels' launch helper reads it (core/cuda/pdl.h)
  wgmma_ = kernels.attention_wgmma != WgmmaMode::kOff && attention_flash_wgmma_available();
  DG_CHECK(wgmma_ || kernels.attention_wgmma != WgmmaMode::kOn,
           "--attention-wgmma on needs an sm_90a build and a Hopper GPU (use auto or off)");
  check(cudaStreamCreateWithFlags(&ctx_->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  stream_ = ctx_->stream;
  if (kernels.graph_arena) graph_.set_arena(&ctx_->arena);
  cudaMemPool_t pool;
  check(cudaDeviceGetDefaultMemPool(&pool, device), "cudaDeviceGetDefaultMemPool");
  uint64_t keep = UINT64_MAX;  // freed blocks stay cached for reuse
  check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
  check(cublasCreate(&blas_), "cublasCreate");
  check(cublasSetStream(blas_, stream_), "cublasSetStream");
  // A fixed cuBLAS workspace: no allocation inside a graph capture.
  check(cudaMalloc(&blas_ws_, kBlasWorkspace), "cuBLAS workspace");
  check(cublasSetWorkspace(blas_, blas_ws_, kBlasWorkspace), "cublasSetWorkspace");
  // The same workspace: cuBLAS and cuBLASLt run on the one stream, never at once.
  fp8_ = std::make_unique<Fp8Gemm>(blas_ws_, kBlasWorkspace);
  fp8_->use_own_rows(kernels.a8_rows != A8RowsMode::kCublasLt, kernels.a8_rows == A8RowsMode::kAll);
  if (kernels.sc_survivors > 0) {  // the survivor path's graph branch (vocab_products.h): its stream and handle
    check(cudaStreamCreateWithFlags(&branch_stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cublasCreate(&branch_blas_), "cublasCreate");
    check(cublasSetStream(branch_blas_, branch_stream_), "cublasSetStream");
    // The main workspace: the branch's work is ordered between the step's, never beside it.
    check(cublasSetWorkspace(branch_blas_, blas_ws_, kBlasWorkspace), "cublasSetWorkspace");
  }
  check(cudaEventCreateWithFlags(&ids_done_, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaMalloc(&route_ticket_, sizeof(unsigned)), "the MoE routing ticket");
  check(cudaMemset(route_ticket_, 0, sizeof(unsigned)), "the MoE routing ticket");
  if (kernels.moe_route_ahead) {  // the routing beside the dense MLP (moe_route_ahead): its stream and handle
    check(cudaStreamCreateWithFlags(&route_stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cublasCreate(&route_blas_), "cublasCreate");
    check(cublasSetStream(route_blas_, route_stream_), "cublasSetStream");
    // A workspace of its own (the handles run at once) of the main one's size, so cuBLAS picks the same product.
    check(cudaMalloc(&route_ws_, kBlasWorkspace), "cuBLAS workspace");
    check(cublasSetWorkspace(route_blas_, route_ws_, kBlasWorkspace), "cublasSetWorkspace");
    check(cudaEventCreateWithFlags(&route_fork_, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventCreateWithFlags(&route_join_, cudaEventDisableTiming), "cudaEventCreate");
  }
}

uint64_t CudaBackend::own_e4m3_products() const { return fp8_->own_products(); }

CudaBackend::~CudaBackend() {
  cudaStreamSynchronize(stream_);
  inv_freq_.clear();
  if (ids_staging_ != nullptr) cudaFreeHost(ids_staging_);
  cudaEventDestroy(ids_done_);
  fp8_.reset();
  cublasDestroy(blas_);
  if (branch_blas_ != nullptr) cublasDestroy(branch_blas_);
  if (branch_stream_ != nullptr) cudaStreamDestroy(branch_stream_);
  cudaFree(blas_ws_);
  cudaFree(route_ticket_);
  if (route_blas_ != nullptr) cublasDestroy(route_blas_);
  if (route_stream_ != nullptr) cudaStreamDestroy(route_stream_);
  if (route_ws_ != nullptr) cudaFree(route_ws_);
  if (route_fork_ != nullptr) cudaEventDestroy(route_fork_);
  if (route_join_ != nullptr) cudaEventDestroy(route_join_);
}

Tensor CudaBackend::device(DType t, Shape s, size_t bytes) {
  Tensor out;
  out.dtype = t;
  out.shape = s;
  out.device = Device::kCuda;
  bytes = std::max<size_t>(std::max<size_t>(bytes, out.nbytes()), 16);
  void* p = nullptr;
  cuda::CaptureArena* arena = nullptr;  // set: placed by the step graph's capture arena (ctx_->arena)
  check(cuda::stream_alloc(&p, bytes, stream_, &arena), "cudaMallocAsync");
  out.data = p;
  if (arena != nullptr) {
    out.owner = std::shared_ptr<void>(p, [ctx = ctx_, arena](void* q) { arena->release(q, ctx->stream); });
  } else {
    out.owner = std::shared_ptr<void>(p, [ctx = ctx_](void* q) { cudaFreeAsync(q, ctx->stream); });
  }
  return out;
}

Tensor CudaBackend::upload(const Tensor& t) {
  if (t.empty()) return t;
  Tensor dst = device(dtype_is_packed(t.dtype) ? t.dtype : DType::kBF16, t.shape, packed_bytes(t.dtype, t.shape));
  if (dtype_is_packed(t.dtype) || t.dtype == DType::kBF16) {
    check(cudaMemcpyAsync(dst.data, t.data, t.nbytes(), cudaMemcpyHostToDevice, stream_), "upload");
    to_kernel_layout(dst);
  } else {
    Tensor raw = device(t.dtype, t.shape);
    check(cudaMemcpyAsync(raw.data, t.data, t.nbytes(), cudaMemcpyHostToDevice, stream_), "upload");
    check(convert_cuda(raw.data, t.dtype, dst.data, DType::kBF16, t.numel(), stream_));
    to_kernel_layout(dst);
  }
  return dst;  // pageable host memory: the copy has left the host buffer when cudaMemcpyAsync returns
}

size_t CudaBackend::packed_bytes(DType fmt, const Shape& s) const {
  return fmt == DType::kQ4 && q4_layout() == WeightLayout::kKernel ? static_cast<size_t>(q4_kernel_layout_bytes(s)) : 0;
}

void CudaBackend::to_kernel_layout(Tensor& t) {
  if (row_tiled_experts(kernels_, t.dtype, t.shape)) check(to_row_tiles_cuda(t.data, t.dtype, t.shape, stream_));
  if (t.dtype != DType::kQ4 || q4_layout() != WeightLayout::kKernel) return;
  check(q4_to_kernel_layout_cuda(t.data, t.shape, stream_));
  if (q4_tiled_experts(kernels_, t.shape)) check(q4_to_tiled_layout_cuda(t.data, t.shape, stream_));
}

void CudaBackend::place_side_by_side(std::span<Tensor* const> group) {
  std::vector<Tensor*> ts;
  for (Tensor* t : group)
    if (!t->empty()) ts.push_back(t);
  if (ts.size() < 2) return;
  if (ts[0]->dtype == DType::kFp8) {
    place_fp8_side_by_side(ts);
    return;
  }
  int64_t rows = 0;
  for (Tensor* t : ts) {
    if (t->dtype != DType::kBF16 || t->device != Device::kCuda || t->shape.rank != 2 ||
        t->shape[1] != ts[0]->shape[1])
      return;
    rows += t->shape[0];
  }
  move_into(ts, device(DType::kBF16, Shape{rows, ts[0]->shape[1]}), [](const Tensor& t) {
    return static_cast<int64_t>(t.nbytes());
  });
}

// Copies each tensor into `all`, each `stride(t)` bytes past the one before, and makes it a view there.
void CudaBackend::move_into(std::span<Tensor* const> ts, const Tensor& all,
                            const std::function<int64_t(const Tensor&)>& stride) {
  char* at = static_cast<char*>(all.data);
  for (Tensor* t : ts) {
    check(cudaMemcpyAsync(at, t->data, t->nbytes(), cudaMemcpyDeviceToDevice, stream_), "side_by_side");
    const int64_t step = stride(*t);
    Tensor view = *t;
    view.data = at;
    view.owner = all.owner;
    *t = view;
    at += step;
  }
}

// fp8 weights [n_i, K] (packed: the codes, then their row scales) each at a multiple of 16 code rows past the first
// (fp8_group_stride), so one e4m3 product over the first's codes with n = the span's rows covers them all, the rows
// between (a weight's scales and padding read as codes) giving columns no reader takes.
void CudaBackend::place_fp8_side_by_side(std::span<Tensor* const> ts) {
  const int64_t K = ts[0]->shape[1];
  int64_t bytes = 0;
  for (Tensor* t : ts) {
    if (t->dtype != DType::kFp8 || t->device != Device::kCuda || t->shape.rank != 2 || t->shape[1] != K ||
        t->shape[0] % 16 != 0 || K % 16 != 0)
      return;
    bytes += fp8_group_stride(*t);
  }
  const Tensor all = device(DType::kU8, Shape{bytes});
  check(cudaMemsetAsync(all.data, 0, static_cast<size_t>(bytes), stream_), "side_by_side");
  move_into(ts, all, [](const Tensor& t) { return fp8_group_stride(t); });
}

Tensor CudaBackend::ids(std::span<const int32_t> ids) {
  Tensor t = device(DType::kI32, Shape{static_cast<int64_t>(ids.size())});
  if (!ids.empty())
    check(cudaMemcpyAsync(t.data, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice, stream_), "ids upload");
  return t;
}

void CudaBackend::ids_into(std::span<const int32_t> ids, Tensor& dst) {
  DG_CHECK(dst.dtype == DType::kI32 && dst.numel() == static_cast<int64_t>(ids.size()),
           "ids_into: {} ids for a tensor of {}", ids.size(), dst.numel());
  if (ids.empty()) return;
  check(cudaEventSynchronize(ids_done_), "ids staging");  // the previous upload has left the staging buffer
  if (ids_capacity_ < ids.size()) {
    if (ids_staging_ != nullptr) check(cudaFreeHost(ids_staging_), "cudaFreeHost");
    check(cudaMallocHost(&ids_staging_, ids.size() * 4), "cudaMallocHost");
    ids_capacity_ = ids.size();
  }
  std::memcpy(ids_staging_, ids.data(), ids.size() * 4);
  check(cudaMemcpyAsync(dst.data, ids_staging_, ids.size() * 4, cudaMemcpyHostToDevice, stream_), "ids upload");
  check(cudaEventRecord(ids_done_, stream_), "cudaEventRecord");
}

void CudaBackend::capture_begin() {
  DG_CHECK(can_capture(), "graph capture needs a MoE kernel without host synchronisation (not --moe {})",
           kernel_name(kernels_.moe));
  graph_.begin(stream_);
}

void CudaBackend::row_stats(const Tensor& logits, float temperature, Tensor& tempered, RowStats* host_stats) {
  stats_to_host(tensor_rows(logits), host_stats, [&](RowStats* st) {
    return row_stats_cuda(logits.f32(), tensor_rows(logits), tensor_cols(logits), temperature, tempered.data, st,
                          stream_, row_stats_form());
  });
}

void CudaBackend::row_stats_open(Tensor& logits, const OpenLogits& open, int64_t row0, float temperature,
                                 Tensor& tempered, RowStats* host_stats, bool finish) {
  if (!open.open) return row_stats(logits, temperature, tempered, host_stats);
  const int64_t T = tensor_rows(logits);
  DG_CHECK(row0 >= 0 && (open.row_scale.empty() || row0 + T <= open.row_scale.numel()),
           "row_stats_open: rows [{}, {}) of an lm_head result of {} rows", row0, row0 + T, open.row_scale.numel());
  const OpenLogitsIn in{open.row_scale.empty() ? nullptr : open.row_scale.f32() + row0, open.col_scale, open.cap,
                        finish};
  stats_to_host(T, host_stats, [&](RowStats* st) {
    return row_stats_open_cuda(logits.f32(), T, tensor_cols(logits), in, temperature, tempered.data, st, stream_,
                               row_stats_form());
  });
}

void CudaBackend::stats_to_host(int64_t rows, RowStats* host_stats, const std::function<Status(RowStats*)>& run) {
  Tensor st = device(DType::kU8, Shape{rows * static_cast<int64_t>(sizeof(RowStats))});
  check(run(static_cast<RowStats*>(st.data)));
  check(cudaMemcpyAsync(host_stats, st.data, static_cast<size_t>(rows) * sizeof(RowStats), cudaMemcpyDeviceToHost,
                        stream_),
        "row_stats copy");
  check(cudaStreamSynchronize(stream_), "row_stats sync");
}

void CudaBackend::categorical(const Tensor& logits, float temperature, std::span<const double> u, int32_t* host_ids) {
  const int64_t T = tensor_rows(logits);
  Tensor ud = device(DType::kU8, Shape{T * 8}), ids = device(DType::kI32, Shape{T});
  check(cudaMemcpyAsync(ud.data, u.data(), u.size() * 8, cudaMemcpyHostToDevice, stream_), "u upload");
  check(categorical_cuda(logits.f32(), T, tensor_cols(logits), temperature, static_cast<const double*>(ud.data),
                         ids.as<int32_t>(), stream_));
  check(cudaMemcpyAsync(host_ids, ids.data, static_cast<size_t>(T) * 4, cudaMemcpyDeviceToHost, stream_),
        "ids copy");
  check(cudaStreamSynchronize(stream_), "categorical sync");
}

std::unique_ptr<Decider> CudaBackend::make_decider() {
  if (kernels_.decide != DecideMode::kDevice) return nullptr;  // the host decides (CudaKernels::decide)
  return make_cuda_decider(stream_, [this](DType t, Shape sh) { return device(t, sh); }, row_stats_form());
}

void CudaBackend::configure_kv(KvOptions& o, int64_t context) {
  o.storage = Storage::kF16;
  o.initial_capacity = context;
  o.device_alloc = [this](Shape s) { return alloc_kv(s); };
  o.device_digests = [this](const Tensor& t, int64_t row_bytes, uint64_t* host) {
    const int64_t rows = static_cast<int64_t>(t.nbytes()) / row_bytes;
    Tensor d = device(DType::kU8, Shape{rows * 8});
    check(row_digests_cuda(t.data, rows, row_bytes, static_cast<uint64_t*>(d.data), stream_));
    check(cudaMemcpyAsync(host, d.data, static_cast<size_t>(rows) * 8, cudaMemcpyDeviceToHost, stream_),
          "kv digests copy");
    check(cudaStreamSynchronize(stream_), "kv digests sync");
  };
  o.device_read = [this](const Tensor& t, void* host) {
    check(cudaMemcpyAsync(host, t.data, t.nbytes(), cudaMemcpyDeviceToHost, stream_), "kv read");
    check(cudaStreamSynchronize(stream_), "kv read sync");
  };
}

void CudaBackend::synchronize() { check(cudaStreamSynchronize(stream_), "synchronize"); }

void CudaBackend::fill_uniform(Tensor& t, uint64_t seed, float scale, float offset) {
  DG_CHECK(t.dtype == DType::kBF16, "fill_uniform: bf16 tensors only");
  check(fill_uniform_cuda(t.data, t.numel(), seed, scale, offset, stream_));
}

Tensor CudaBackend::synthetic_packed(DType fmt, Shape s, uint64_t seed, float amax) {
  DG_CHECK(moe_stream_supports(fmt) && dtype_is_packed(fmt), "synthetic weights: the CUDA backend has no {} kernel",
           dtype_name(fmt));
  Tensor t = device(fmt, s, packed_bytes(fmt, s));
  check(fill_packed_cuda(t.data, fmt, s, seed, amax, stream_));
  to_kernel_layout(t);
  return t;
}

void CudaBackend::profiler_range(bool on) {
  check(on ? cudaProfilerStart() : cudaProfilerStop(), on ? "cudaProfilerStart" : "cudaProfilerStop");
}

std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& o) {
  return std::make_unique<CudaBackend>(o.rms_eps, o.device, o.cuda, o.linear_act8);
}

bool cuda_present() { return cuda_device_count() > 0; }

}  // namespace dg
