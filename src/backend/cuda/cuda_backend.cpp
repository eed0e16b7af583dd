// The CUDA backend: bf16 activations and weights (or a pack's packed bytes, run by the streaming kernel), an f16 KV
// cache, f32 logits. Dense bf16 products go through cuBLAS (bf16 in, f32 accumulate); everything else is our
// kernels in src/ops/*/*.cu. Buffers come from the stream-ordered allocator, so per-op allocations reuse memory
// without synchronising.
#include <cublas_v2.h>
#include <cuda_profiler_api.h>

#include <cmath>
#include <cstring>
#include <algorithm>
#include <map>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/attention_heads.h"
#include "backend/cuda/cublas_paths.h"
#include "backend/cuda/cuda_decider.h"
#include "backend/cuda/device_info.h"
#include "backend/cuda/fp8_gemm.h"
#include "backend/cuda/host_check.h"
#include "backend/cuda/host_copies.h"
#include "backend/cuda/moe_path.h"
#include "backend/cuda/packed_linear.h"
#include "backend/cuda/packed_weights.h"
#include "backend/cuda/step_graph.h"
#include "backend/cuda/vocab_products.h"
#include "backend/synthetic_fill.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/pdl.h"
#include "core/error.h"
#include "ops/attention/attention_cuda.h"
#include "ops/elementwise/elementwise.h"
#include "ops/embed/embed_cuda.h"
#include "ops/glu/glu_cuda.h"
#include "ops/moe/moe_cuda.h"
#include "ops/moe/q4_layout.h"
#include "ops/residual/residual.h"
#include "ops/rmsnorm/rmsnorm_cuda.h"
#include "ops/rope/rope_cuda.h"
#include "ops/row_stats/row_stats_cuda.h"

namespace dg {
namespace {

using cuda_host::check;

int64_t tensor_rows(const Tensor& t) { return t.numel() / t.shape[t.shape.rank - 1]; }
int64_t tensor_cols(const Tensor& t) { return t.shape[t.shape.rank - 1]; }

// The stream outlives every buffer allocated on it: each buffer's deleter holds a reference.
struct StreamCtx {
  cudaStream_t stream = nullptr;
  ~StreamCtx() {
    if (stream != nullptr) {
      cudaStreamSynchronize(stream);
      cudaStreamDestroy(stream);
    }
  }
};

class CudaBackend final : public Backend, public SyntheticFill {
 public:
  CudaBackend(float eps, int device, const CudaKernels& kernels, bool linear_act8)
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
    check(cudaEventCreateWithFlags(&ids_done_, cudaEventDisableTiming), "cudaEventCreate");
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
    inv_freq_.clear();
    if (ids_staging_ != nullptr) cudaFreeHost(ids_staging_);
    cudaEventDestroy(ids_done_);
    fp8_.reset();
    cublasDestroy(blas_);
    cudaFree(blas_ws_);
  }
  std::string name() const override { return "cuda"; }
  Precision precision() const override { return Precision{Storage::kBF16, Storage::kF16}; }

  // `bytes`: the allocation's size when it is not nbytes() (q4 in the kernel layout).
  Tensor device(DType t, Shape s, size_t bytes = 0) {
    Tensor out;
    out.dtype = t;
    out.shape = s;
    out.device = Device::kCuda;
    bytes = std::max<size_t>(std::max<size_t>(bytes, out.nbytes()), 16);
    void* p = nullptr;
    check(cudaMallocAsync(&p, bytes, stream_), "cudaMallocAsync");
    out.data = p;
    out.owner = std::shared_ptr<void>(p, [ctx = ctx_](void* q) { cudaFreeAsync(q, ctx->stream); });
    return out;
  }
  Tensor alloc(Shape s) override { return device(DType::kBF16, s); }
  Tensor alloc_f32(Shape s) override { return device(DType::kF32, s); }
  Tensor alloc_kv(Shape s) { return device(DType::kF16, s); }

  void check_weight(const Tensor& host, WeightUse use, const std::string& what) const override {
    cuda_check_weight(host, use, what, kernels_);
  }
  // Packed weights keep their planes as stored (the kernels dequantise in registers; q4 is rearranged into the
  // kernel layout unless kernels_.q4_kernel_layout is off); others become bf16.
  Tensor upload(const Tensor& t) override {
    if (t.empty()) return t;
    Tensor dst = device(dtype_is_packed(t.dtype) ? t.dtype : DType::kBF16, t.shape, packed_bytes(t.dtype, t.shape));
    if (dtype_is_packed(t.dtype) || t.dtype == DType::kBF16) {
      check(cudaMemcpyAsync(dst.data, t.data, t.nbytes(), cudaMemcpyHostToDevice, stream_), "upload");
      to_kernel_layout(dst);
    } else {
      Tensor raw = device(t.dtype, t.shape);
      check(cudaMemcpyAsync(raw.data, t.data, t.nbytes(), cudaMemcpyHostToDevice, stream_), "upload");
      check(convert_cuda(raw.data, t.dtype, dst.data, DType::kBF16, t.numel(), stream_));
    }
    return dst;  // pageable host memory: the copy has left the host buffer when cudaMemcpyAsync returns
  }
  Q4Layout q4_layout() const { return kernels_.q4_kernel_layout ? Q4Layout::kKernel : Q4Layout::kDisk; }
  // The allocation a device tensor of `fmt` needs beyond nbytes(): q4 in the kernel layout keeps its factors after
  // the planes. 0: nbytes().
  size_t packed_bytes(DType fmt, const Shape& s) const {
    return fmt == DType::kQ4 && q4_layout() == Q4Layout::kKernel ? static_cast<size_t>(q4_kernel_layout_bytes(s)) : 0;
  }
  // A q4 device tensor in the disk layout becomes the kernel layout (when that is the backend's choice).
  void to_kernel_layout(Tensor& t) {
    if (t.dtype == DType::kQ4 && q4_layout() == Q4Layout::kKernel)
      check(q4_to_kernel_layout_cuda(t.data, t.shape, stream_));
  }
  // Moves bf16 device weights of equal width into one allocation, in order (their rows concatenated); the tensors
  // become views of it. Empty or packed tensors leave the group as it is.
  void place_side_by_side(std::span<Tensor* const> group) override {
    std::vector<Tensor*> ts;
    for (Tensor* t : group)
      if (!t->empty()) ts.push_back(t);
    if (ts.size() < 2) return;
    int64_t rows = 0;
    for (Tensor* t : ts) {
      if (t->dtype != DType::kBF16 || t->device != Device::kCuda || t->shape.rank != 2 ||
          t->shape[1] != ts[0]->shape[1])
        return;
      rows += t->shape[0];
    }
    Tensor all = device(DType::kBF16, Shape{rows, ts[0]->shape[1]});
    char* at = static_cast<char*>(all.data);
    for (Tensor* t : ts) {
      check(cudaMemcpyAsync(at, t->data, t->nbytes(), cudaMemcpyDeviceToDevice, stream_), "side_by_side");
      Tensor view = *t;
      view.data = at;
      view.owner = all.owner;
      *t = view;
      at += t->nbytes();
    }
  }

  Tensor ids(std::span<const int32_t> ids) override {
    Tensor t = device(DType::kI32, Shape{static_cast<int64_t>(ids.size())});
    if (!ids.empty())
      check(cudaMemcpyAsync(t.data, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice, stream_), "ids upload");
    return t;
  }
  void ids_into(std::span<const int32_t> ids, Tensor& dst) override {
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

  // Graphs need every op of the step to be stream-ordered without host round trips: the cuBLAS grouped MoE
  // reads its group sizes on the host, so it cannot be captured.
  bool can_capture() const override { return kernels_.moe != MoeKernel::kCublas; }
  void capture_begin() override {
    DG_CHECK(can_capture(), "graph capture needs a MoE kernel without host synchronisation (not --moe {})",
             kernel_name(kernels_.moe));
    graph_.begin(stream_);
  }
  void capture_end() override { graph_.end(stream_); }
  void launch_captured() override { graph_.launch(stream_); }
  uint64_t captures() const override { return graph_.captures(); }
  GraphStats graph_stats() const override { return graph_.stats(); }

  void copy_to_host(const Tensor& t, float* dst) override { device_to_host_f32(t, dst, stream_); }
  void copy_from_host(const float* src, Tensor& t) override { host_f32_to_device(src, t, stream_); }

  void embed(const Tensor& ids, const Tensor& table, Tensor& out) override {
    check(embed_cuda(ids.as<int32_t>(), ids.numel(), table.data, table.shape[1],
                     embed_scale(table.shape[1], Storage::kBF16), out.data, stream_));
  }
  void rmsnorm(const Tensor& x, const Tensor* w, Tensor& out) override {
    check(rmsnorm_cuda(x.data, DType::kBF16, w ? w->data : nullptr, DType::kBF16, out.data, DType::kBF16,
                       tensor_rows(x), tensor_cols(x), eps_, stream_));
  }
  void linear(const Tensor& x, const Tensor& w, Tensor& out) override {
    if (dtype_is_packed(w.dtype)) {
      packed_linear_cuda(blas_ctx(), x, tensor_rows(x), tensor_cols(x), w, out, q4_layout(), linear_act8_);
      return;
    }
    dense_linear_cuda(blas_ctx(), x.data, tensor_rows(x), tensor_cols(x), w.data, w.shape[0], out.data);
  }
  void rope(Tensor& x, int64_t pos0, const std::vector<float>& inv_freq) override {
    check(rope_cuda(x.data, x.shape[0], x.shape[1], x.shape[2], pos0, device_inv_freq(inv_freq), stream_));
  }
  void rope_spans(Tensor& x, std::span<const RopeSpan> spans, const std::vector<float>& inv_freq) override {
    check(rope_spans_cuda(x.data, x.shape[0], x.shape[1], x.shape[2], spans.data(), static_cast<int>(spans.size()),
                          device_inv_freq(inv_freq), stream_));
  }
  void rmsnorm_rope(const Tensor& x, const Tensor* w, Tensor& out, int64_t pos0,
                    const std::vector<float>& inv_freq) override {
    if (!kernels_.fused_norms || x.shape.rank != 3 || x.shape[2] % 16 != 0 || x.shape[2] > 1024) {
      Backend::rmsnorm_rope(x, w, out, pos0, inv_freq);
      return;
    }
    check(rmsnorm_rope_cuda(x.data, w ? w->data : nullptr, out.data, x.shape[0], x.shape[1], x.shape[2], eps_, pos0,
                            device_inv_freq(inv_freq), stream_));
  }
  void add(const Tensor& a, const Tensor& b, Tensor& out) override {
    check(add_cuda(a.data, b.data, out.data, out.numel(), stream_));
  }
  void scale(Tensor& x, float s) override { check(scale_cuda(x.data, s, x.numel(), stream_)); }
  // Weights placed side by side (place_side_by_side) take one product; the split (or the gated GELU of the two halves)
  // follows. Others take linear() each.
  void linears(const Tensor& x, std::span<const Tensor* const> w, std::span<Tensor* const> out) override {
    if (!linears_cuda(blas_ctx(), linear_act8_, x, w, out)) Backend::linears(x, w, out);
  }
  void qkv_heads(const Tensor& a, std::span<const Tensor* const> w, const Tensor* q_norm, const Tensor& k_norm,
                 std::span<const RopeSpan> spans, const std::vector<float>& inv_freq, Tensor* qn, Tensor& kn,
                 Tensor& vn, FreshKvCopy* copy) override {
    const auto products = [&](std::span<Tensor* const> outs) { linears(a, w, outs); };
    if (copy != nullptr) *copy = {};
    // The flash kernels read fresh rows as f16: heads_norm writes that copy too, so attention converts nothing.
    const bool f16 = copy != nullptr && flash_for(kn.shape[2]);
    if (!kernels_.fused_norms ||
        !qkv_heads_cuda(blas_ctx(), eps_, device_inv_freq(inv_freq), a, w, q_norm, k_norm, spans, qn, kn, vn,
                        products, a.shape[0] >= kernels_.rope_table_rows, f16 ? copy : nullptr))
      Backend::qkv_heads(a, w, q_norm, k_norm, spans, inv_freq, qn, kn, vn, copy);
  }
  void gated_linear(const Tensor& x, const Tensor& gate, const Tensor& up, Tensor& out) override {
    if (!gated_linear_cuda(blas_ctx(), linear_act8_, x, gate, up, out)) Backend::gated_linear(x, gate, up, out);
  }
  void residual_norms(const Tensor& h, Tensor& attn, const Tensor& w_post, Tensor& h1,
                      std::span<const Tensor* const> w, std::span<Tensor* const> out) override {
    if (!kernels_.fused_norms) {
      Backend::residual_norms(h, attn, w_post, h1, w, out);
      return;
    }
    DG_CHECK(w.size() == out.size() && w.size() <= 3, "residual_norms: {} weights for {} outputs", w.size(),
             out.size());
    const void* ws[3] = {};
    void* outs[3] = {};
    for (size_t i = 0; i < w.size(); ++i) {
      ws[i] = w[i] != nullptr ? w[i]->data : nullptr;
      outs[i] = out[i]->data;
    }
    check(residual_norms_cuda(h.data, attn.data, w_post.data, h1.data, ws, outs, static_cast<int>(w.size()),
                              tensor_rows(h), tensor_cols(h), eps_, stream_));
  }
  void ffn_tail(const Tensor& h1, Tensor& m1, const Tensor& w1, Tensor& m2, const Tensor& w2, const Tensor& w, float s,
                Tensor& out) override {
    if (!kernels_.fused_norms) {
      Backend::ffn_tail(h1, m1, w1, m2, w2, w, s, out);
      return;
    }
    check(ffn_tail_cuda(h1.data, m1.data, w1.data, m2.data, w2.data, w.data, s, out.data, tensor_rows(h1),
                        tensor_cols(h1), eps_, stream_));
  }
  void gelu_mul(const Tensor& gate, const Tensor& up, Tensor& out) override {
    check(gelu_mul_cuda(gate.data, up.data, out.data, gate.numel(), stream_));
  }

  void attention(const Tensor& q, int64_t q_pos0, const KvLayer& kv, int64_t cache_from, int64_t cache_to,
                 const Tensor& k_fresh, const Tensor& v_fresh, int64_t fresh_pos0, bool causal, int64_t window,
                 Tensor& out) override {
    DG_CHECK(kv.k.device == Device::kCuda, "the CUDA backend needs a device KV cache (EngineCore::new_cache)");
    const CachedKv cached{kv.k.data, kv.v.data, kv.cap, kv.ring, cache_from, cache_to};
    const AttnShape sh{q.shape[1], k_fresh.shape[1], q.shape[2]};
    if (flash_for(sh.head_dim)) {
      const Tensor kf = as_f16(k_fresh), vf = as_f16(v_fresh);
      check(attention_flash_cuda(q.data, q.shape[0], q_pos0, cached, kf.data, vf.data, k_fresh.shape[0], fresh_pos0,
                                 sh, causal, window, out.data, stream_, 16, kernels_.attention_cols,
                                 kernels_.attention_pairs, wgmma_));
      return;
    }
    DG_CHECK(k_fresh.dtype == DType::kBF16 && v_fresh.dtype == DType::kBF16,
             "attention: fresh rows in {} for a kernel that reads bf16", dtype_name(k_fresh.dtype));
    if (kernels_.attention != AttentionKernel::kWarp) {  // gemm, and flash for head dims it does not cover
      attention_gemm_cublas(blas_ctx(), q, q_pos0, cached, k_fresh, v_fresh, fresh_pos0, causal, window, out);
      return;
    }
    check(attention_cuda(q.data, q.shape[0], q_pos0, cached, k_fresh.data, v_fresh.data, k_fresh.shape[0], fresh_pos0,
                         sh, causal, window, out.data, stream_));
  }
  // Several sequences: one launch of the flash kernel over all of them when their query tiles fill a wave of the
  // GPU (a batched step); otherwise per-sequence calls, whose key splits fill it better.
  void attention_segments(const Tensor& q, std::span<const AttnSegment> segs, const Tensor& k_fresh,
                          const Tensor& v_fresh, bool causal, int64_t window, Tensor& out) override {
    const AttnShape sh{q.shape[1], k_fresh.shape[1], q.shape[2]};
    std::vector<FlashSegment> fs;
    fs.reserve(segs.size());
    for (const AttnSegment& g : segs) {
      DG_CHECK(g.kv->k.device == Device::kCuda, "the CUDA backend needs a device KV cache (EngineCore::new_cache)");
      fs.push_back(FlashSegment{g.row0, g.rows, g.pos0,
                                CachedKv{g.kv->k.data, g.kv->v.data, g.kv->cap, g.kv->ring, g.cache_from, g.cache_to}});
    }
    const bool one_launch = flash_for(sh.head_dim) &&
                            (kernels_.attention_segments == SegmentsMode::kOne ||
                             (kernels_.attention_segments == SegmentsMode::kAuto &&
                              attention_flash_segments_fill(fs, sh, kernels_.attention_cols, kernels_.attention_pairs,
                                                            wgmma_)));
    if (!one_launch) {
      Backend::attention_segments(q, segs, k_fresh, v_fresh, causal, window, out);
      return;
    }
    const Tensor kf = as_f16(k_fresh), vf = as_f16(v_fresh);
    check(attention_flash_segments_cuda(q.data, fs, kf.data, vf.data, sh, causal, window, out.data, stream_,
                                        kernels_.attention_cols, kernels_.attention_pairs, wgmma_));
  }
  void attention_topk(const Tensor& q, int64_t q_pos0, const KvLayer& kv, int64_t cache_from, int64_t cache_to,
                      const Tensor& k_fresh, const Tensor& v_fresh, int64_t fresh_pos0, bool causal, int64_t window,
                      const AttnTopk& topk, Tensor& out) override {
    if (!topk.on()) {
      attention(q, q_pos0, kv, cache_from, cache_to, k_fresh, v_fresh, fresh_pos0, causal, window, out);
      return;
    }
    DG_CHECK(kv.k.device == Device::kCuda, "the CUDA backend needs a device KV cache (EngineCore::new_cache)");
    const CachedKv cached{kv.k.data, kv.v.data, kv.cap, kv.ring, cache_from, cache_to};
    attention_topk_cublas(blas_ctx(), q, q_pos0, cached, k_fresh, v_fresh, fresh_pos0, causal, window, topk, out);
  }
  void kv_write(const KvLayer& kv, int64_t pos0, const Tensor& k, const Tensor& v) override {
    const int64_t n = k.shape[0];
    check(kv_write_cuda(k.data, v.data, n, k.numel() / n, pos0, kv.k.data, kv.v.data, kv.cap, kv.ring, stream_));
  }

  void moe(const Tensor& h, const Tensor& z, const MoeWeights& w, int top_k, Tensor& out) override {
    const MoePathCtx c{blas_ctx(), kernels_, eps_, graph_.capturing(), q4_layout(),
                       [this](const char* n) { stage(n); }};
    moe_cuda_path(c, h, z, w, top_k, out);
  }

  void moe_ffn_tail(const Tensor& h, const Tensor& z, const MoeWeights& w, int top_k, Tensor& m1, const Tensor& w1,
                    const Tensor& w2, const Tensor& wn, float s, Tensor& out) override {
    if (!kernels_.fused_norms) {
      Backend::moe_ffn_tail(h, z, w, top_k, m1, w1, w2, wn, s, out);
      return;
    }
    const MoePathCtx c{blas_ctx(), kernels_, eps_, graph_.capturing(), q4_layout(),
                       [this](const char* n) { stage(n); }};
    const MoeTail tail{m1, w1, w2, wn, s};
    moe_cuda_path(c, h, z, w, top_k, out, &tail);
  }

  void lm_head(const Tensor& y, const Tensor& embed, float softcap, Tensor& logits) override {
    lm_head_cuda(blas_ctx(), y, embed, softcap, logits);
  }
  Tensor fp8_table(const Tensor& table, bool transpose) override { return fp8_table_cuda(blas_ctx(), table, transpose); }
  void soft_embed(const Tensor& sc_logits, const Tensor& embed, float sparse_cutoff, Tensor& out) override {
    soft_embed_cuda(blas_ctx(), sc_logits, embed, sparse_cutoff, out);
  }

  void row_stats(const Tensor& logits, float temperature, Tensor& tempered, RowStats* host_stats) override {
    const int64_t T = tensor_rows(logits);
    Tensor st = device(DType::kU8, Shape{T * static_cast<int64_t>(sizeof(RowStats))});
    check(row_stats_cuda(logits.f32(), T, tensor_cols(logits), temperature, tempered.data,
                         static_cast<RowStats*>(st.data), stream_));
    check(cudaMemcpyAsync(host_stats, st.data, static_cast<size_t>(T) * sizeof(RowStats), cudaMemcpyDeviceToHost,
                          stream_),
          "row_stats copy");
    check(cudaStreamSynchronize(stream_), "row_stats sync");
  }
  void categorical(const Tensor& logits, float temperature, std::span<const double> u, int32_t* host_ids) override {
    const int64_t T = tensor_rows(logits);
    Tensor ud = device(DType::kU8, Shape{T * 8}), ids = device(DType::kI32, Shape{T});
    check(cudaMemcpyAsync(ud.data, u.data(), u.size() * 8, cudaMemcpyHostToDevice, stream_), "u upload");
    check(categorical_cuda(logits.f32(), T, tensor_cols(logits), temperature, static_cast<const double*>(ud.data),
                           ids.as<int32_t>(), stream_));
    check(cudaMemcpyAsync(host_ids, ids.data, static_cast<size_t>(T) * 4, cudaMemcpyDeviceToHost, stream_),
          "ids copy");
    check(cudaStreamSynchronize(stream_), "categorical sync");
  }

  std::unique_ptr<Decider> make_decider() override {
    if (kernels_.decide != DecideMode::kDevice) return nullptr;  // the host decides (CudaKernels::decide)
    return make_cuda_decider(stream_, [this](DType t, Shape sh) { return device(t, sh); });
  }

  void configure_kv(KvOptions& o, int64_t context) override {
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
  void synchronize() override { check(cudaStreamSynchronize(stream_), "synchronize"); }
  void fill_uniform(Tensor& t, uint64_t seed, float scale, float offset) override {
    DG_CHECK(t.dtype == DType::kBF16, "fill_uniform: bf16 tensors only");
    check(fill_uniform_cuda(t.data, t.numel(), seed, scale, offset, stream_));
  }

  Tensor synthetic_packed(DType fmt, Shape s, uint64_t seed, float amax) override {
    DG_CHECK(moe_stream_supports(fmt) && dtype_is_packed(fmt), "synthetic weights: the CUDA backend has no {} kernel",
             dtype_name(fmt));
    Tensor t = device(fmt, s, packed_bytes(fmt, s));
    check(fill_packed_cuda(t.data, fmt, s, seed, amax, stream_));
    to_kernel_layout(t);
    return t;
  }

  void set_profiling(bool on) override { marks_.set_profiling(on); }
  void stage(const char* name) override { marks_.mark(name, stream_, graph_.capturing()); }
  std::vector<std::pair<std::string, double>> take_stage_times() override { return marks_.take(stream_); }
  std::string device_name() const override { return current_device_name(); }
  void profiler_range(bool on) override {
    check(on ? cudaProfilerStart() : cudaProfilerStop(), on ? "cudaProfilerStart" : "cudaProfilerStop");
  }
  size_t peak_memory() const override { return pool_peak_bytes(); }
  MemoryInfo memory_info() const override { return device_memory_info(); }

 private:
  CublasCtx blas_ctx() {
    return CublasCtx{blas_,       stream_, [this](DType t, Shape sh) { return device(t, sh); }, fp8_.get(),
                     kernels_.a8_linears_stream, kernels_.dense_stream};
  }
  // Whether dense attention at this head dim runs the flash kernels (and so reads fresh rows as f16).
  bool flash_for(int64_t head_dim) const {
    return kernels_.attention == AttentionKernel::kFlash && attention_flash_supports(head_dim);
  }
  // The flash kernels read fresh keys and values as f16, as the cache holds them: qkv_heads' FreshKvCopy as it is,
  // bf16 rows converted.
  Tensor as_f16(const Tensor& t) {
    if (t.dtype == DType::kF16) return t;
    Tensor out = device(DType::kF16, t.shape);
    if (t.numel() > 0) check(convert_cuda(t.data, DType::kBF16, out.data, DType::kF16, t.numel(), stream_));
    return out;
  }
  const float* device_inv_freq(const std::vector<float>& f) {
    auto it = inv_freq_.find(f.data());
    if (it == inv_freq_.end()) {
      DG_CHECK(!graph_.capturing(),
               "rotary frequencies must be on the device before a graph capture (run one step first)");
      Tensor t = device(DType::kF32, Shape{static_cast<int64_t>(f.size())});
      check(cudaMemcpyAsync(t.data, f.data(), f.size() * 4, cudaMemcpyHostToDevice, stream_), "inv_freq upload");
      it = inv_freq_.emplace(f.data(), std::move(t)).first;
    }
    return it->second.f32();
  }

  float eps_;
  CudaKernels kernels_;
  bool linear_act8_;  // fp8 linears take fp8 activations (BackendOptions::linear_act8)
  bool wgmma_ = false;  // head dims 256 and 512 take the wgmma flash blocks (attention_wgmma resolved on the device)
  std::shared_ptr<StreamCtx> ctx_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  std::unique_ptr<Fp8Gemm> fp8_;
  std::map<const float*, Tensor> inv_freq_;  // keyed by the model's per-layer host vectors (stable addresses)
  StageMarks marks_;
  static constexpr size_t kBlasWorkspace = size_t{32} << 20;
  void* blas_ws_ = nullptr;
  StepGraph graph_;
  int32_t* ids_staging_ = nullptr;  // pinned, so graph replays and uploads never read pageable memory
  size_t ids_capacity_ = 0;
  cudaEvent_t ids_done_ = nullptr;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const BackendOptions& o) {
  return std::make_unique<CudaBackend>(o.rms_eps, o.device, o.cuda, o.linear_act8);
}

bool cuda_present() { return cuda_device_count() > 0; }

}  // namespace dg
