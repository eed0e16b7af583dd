// The CUDA backend's class (made by make_cuda_backend, cuda_backend.h): the device, stream, allocator, cuBLAS
// handles and graphs it owns (cuda_backend.cpp), and the forward ops it runs on them (cuda_backend_ops.cpp).
// Included by those two files only.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cublas_paths.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_info.h"
#include "backend/cuda/fp8_gemm.h"
#include "backend/cuda/host_copies.h"
#include "backend/cuda/packed_weights.h"
#include "backend/cuda/step_graph.h"
#include "backend/synthetic_fill.h"
#include "core/cuda/capture_arena.h"
#include "core/status.h"
#include "ops/attention/attention_cuda.h"
#include "ops/moe/moe_cuda.h"
#include "ops/residual/residual.h"
#include "ops/row_stats/row_stats_cuda.h"

namespace dg {

// The stream outlives every buffer allocated on it: each buffer's deleter holds a reference.
struct StreamCtx {
  cudaStream_t stream = nullptr;
  cuda::CaptureArena arena;  // the step graph's buffers (CudaKernels::graph_arena); freed after the stream
  ~StreamCtx() {
    if (stream != nullptr) {
      cudaStreamSynchronize(stream);
      cudaStreamDestroy(stream);
    }
  }
};

class CudaBackend final : public Backend, public SyntheticFill {
 public:
  CudaBackend(float eps, int device, const CudaKernels& kernels, bool linear_act8);
  ~CudaBackend() override;
  std::string name() const override { return "cuda"; }
  Precision precision() const override { return Precision{Storage::kBF16, Storage::kF16}; }

  // `bytes`: the allocation's size when it is not nbytes() (q4 in the kernel layout).
  Tensor device(DType t, Shape s, size_t bytes = 0);
  Tensor alloc(Shape s) override { return device(DType::kBF16, s); }
  Tensor alloc_f32(Shape s) override { return device(DType::kF32, s); }
  Tensor alloc_kv(Shape s) { return device(DType::kF16, s); }

  void check_weight(const Tensor& host, WeightUse use, const std::string& what) const override {
    cuda_check_weight(host, use, what, kernels_);
  }
  // Packed weights keep their planes as stored (the kernels dequantise in registers; q4 is rearranged into the
  // kernel layout unless kernels_.q4_kernel_layout is off); others become bf16. fp8 and bf16 experts are rearranged
  // into stage tiles unless kernels_.fp8_tiles / bf16_tiles are off.
  Tensor upload(const Tensor& t) override;
  WeightLayout q4_layout() const { return kernels_.q4_kernel_layout ? WeightLayout::kKernel : WeightLayout::kDisk; }
  // The allocation a device tensor of `fmt` needs beyond nbytes(): q4 in the kernel layout keeps its factors after
  // the planes. 0: nbytes().
  size_t packed_bytes(DType fmt, const Shape& s) const;
  // A q4 device tensor in the disk layout becomes the kernel layout (and its stage tiles), an fp8 or bf16 expert
  // stack its stage tiles, when those are the backend's choice (q4_tiled_experts, row_tiled_experts).
  void to_kernel_layout(Tensor& t);
  // Moves bf16 device weights of equal width into one allocation, in order (their rows concatenated); the tensors
  // become views of it. Empty or packed tensors leave the group as it is.
  void place_side_by_side(std::span<Tensor* const> group) override;

  Tensor ids(std::span<const int32_t> ids) override;
  void ids_into(std::span<const int32_t> ids, Tensor& dst) override;

  // Graphs need every op of the step to be stream-ordered without host round trips: the cuBLAS grouped MoE
  // reads its group sizes on the host, so it cannot be captured.
  bool can_capture() const override { return kernels_.moe != MoeKernel::kCublas; }
  void capture_begin() override;
  void capture_end() override { graph_.end(stream_); }
  void launch_captured() override { graph_.launch(stream_); }
  uint64_t captures() const override { return graph_.captures(); }
  GraphStats graph_stats() const override { return graph_.stats(); }

  void copy_to_host(const Tensor& t, float* dst) override { device_to_host_f32(t, dst, stream_); }
  void copy_from_host(const float* src, Tensor& t) override { host_f32_to_device(src, t, stream_); }

  void embed(const Tensor& ids, const Tensor& table, Tensor& out) override;
  void rmsnorm(const Tensor& x, const Tensor* w, Tensor& out) override;
  // Buffers where x feeds W8A8 products whose raw sums a chain scales (a8_on_load) and the fused norms are on.
  RowCodes row_codes(const Tensor& x, std::span<const Tensor* const> w) override;
  MoeInputs moe_inputs(const Tensor& z, const MoeWeights& w) override;
  // The router's input where the residual chain did not write it, its product and the routing (moe_route_rows) on a
  // stream of their own, forked from the main one and joined by the block's MoE before its experts
  // (CudaKernels::moe_route_ahead).
  void moe_route_ahead(const Tensor& h, const MoeWeights& w, int top_k, MoeInputs& in) override;
  void rmsnorm_codes(const Tensor& x, const Tensor* w, Tensor& out, RowCodes& codes) override;
  uint64_t row_codes_filled() const override { return row_codes_filled_; }
  uint64_t input_norms_filled() const override { return input_norms_filled_; }
  uint64_t routes_ahead() const override { return routes_ahead_; }
  uint64_t experts_ahead() const override { return experts_ahead_; }
  uint64_t own_e4m3_products() const override;
  void linear(const Tensor& x, const Tensor& w, Tensor& out) override;
  void rope(Tensor& x, int64_t pos0, const std::vector<float>& inv_freq) override;
  void rope_spans(Tensor& x, std::span<const RopeSpan> spans, const std::vector<float>& inv_freq) override;
  void rmsnorm_rope(const Tensor& x, const Tensor* w, Tensor& out, int64_t pos0,
                    const std::vector<float>& inv_freq) override;
  void add(const Tensor& a, const Tensor& b, Tensor& out) override;
  void scale(Tensor& x, float s) override;
  // Weights placed side by side (place_side_by_side) take one product; the split (or the gated GELU of the two halves)
  // follows. Others take linear() each.
  void linears(const Tensor& x, std::span<const Tensor* const> w, std::span<Tensor* const> out) override;
  void qkv_heads(const Tensor& a, std::span<const Tensor* const> w, const Tensor* q_norm, const Tensor& k_norm,
                 std::span<const RopeSpan> spans, const std::vector<float>& inv_freq, Tensor* qn, Tensor& kn,
                 Tensor& vn, FreshKvCopy* copy, const RowCodes* a_codes) override;
  void gated_linear(const Tensor& x, const Tensor& gate, const Tensor& up, Tensor& out, const RowCodes* x_codes,
                    RowCodes* out_codes) override;
  void residual_norms(const Tensor& h, Tensor& attn, const Tensor& w_post, Tensor& h1,
                      std::span<const Tensor* const> w, std::span<Tensor* const> out) override;
  void ffn_tail(const Tensor& h1, Tensor& m1, const Tensor& w1, Tensor& m2, const Tensor& w2, const Tensor& w,
                RowScalar s, Tensor& out) override;
  void gelu_mul(const Tensor& gate, const Tensor& up, Tensor& out) override;

  void attention(const Tensor& q, int64_t q_pos0, const KvLayer& kv, int64_t cache_from, int64_t cache_to,
                 const Tensor& k_fresh, const Tensor& v_fresh, int64_t fresh_pos0, bool causal, int64_t window,
                 Tensor& out) override;
  // Several sequences: one launch of the flash kernel over all of them when their query tiles fill a wave of the
  // GPU (a batched step); otherwise per-sequence calls, whose key splits fill it better.
  void attention_segments(const Tensor& q, std::span<const AttnSegment> segs, const Tensor& k_fresh,
                          const Tensor& v_fresh, bool causal, int64_t window, Tensor& out) override;
  void attention_topk(const Tensor& q, int64_t q_pos0, const KvLayer& kv, int64_t cache_from, int64_t cache_to,
                      const Tensor& k_fresh, const Tensor& v_fresh, int64_t fresh_pos0, bool causal, int64_t window,
                      const AttnTopk& topk, Tensor& out) override;
  void kv_write(const KvLayer& kv, int64_t pos0, const Tensor& k, const Tensor& v) override;

  void moe(const Tensor& h, const Tensor& z, const MoeWeights& w, int top_k, Tensor& out) override;

  void moe_ffn_tail(const Tensor& h, const Tensor& z, const MoeWeights& w, int top_k, Tensor& m1, const Tensor& w1,
                    const Tensor& w2, const Tensor& wn, RowScalar s, Tensor& out, const MoeInputs* moe_in,
                    InputNorm* next) override;
  void linear_residual_norms(const Tensor& x, const Tensor& w_o, const Tensor& h, const Tensor& w_post, Tensor& h1,
                             std::span<const Tensor* const> w, std::span<Tensor* const> out,
                             RowCodes* out0_codes, MoeInputs* moe_in) override;
  void linear_moe_ffn_tail(const Tensor& x, const Tensor& w_down, const Tensor& h, const Tensor& z,
                           const MoeWeights& w, int top_k, const Tensor& w1, const Tensor& w2, const Tensor& wn,
                           RowScalar s, Tensor& out, const RowCodes* x_codes, const MoeInputs* moe_in,
                           InputNorm* next) override;

  void lm_head(const Tensor& y, const Tensor& embed, float softcap, Tensor& logits) override;
  OpenLogits lm_head_open(const Tensor& y, const Tensor& embed, float softcap, Tensor& logits,
                          Tensor* row_scale) override;
  void finish_logits(Tensor& logits, const OpenLogits& open, int64_t row0) override;
  bool open_single_logits() const override { return kernels_.softcap_in_stats && kernels_.softcap_in_stats_single; }
  RowStatsForm row_stats_form() const {
    return kernels_.row_stats_groups ? RowStatsForm::kGroups : RowStatsForm::kEach;
  }
  Tensor fp8_table(const Tensor& table, bool transpose) override;
  void soft_embed(const Tensor& sc_logits, const Tensor& embed, float sparse_cutoff, Tensor& out,
                  const Tensor* rows) override;
  void soft_embeds(std::span<const SoftEmbedJob> jobs, const Tensor& embed, const Tensor* rows) override;

  void row_stats(const Tensor& logits, float temperature, Tensor& tempered, RowStats* host_stats) override;
  void row_stats_open(Tensor& logits, const OpenLogits& open, int64_t row0, float temperature, Tensor& tempered,
                      RowStats* host_stats, bool finish) override;
  void categorical(const Tensor& logits, float temperature, std::span<const double> u, int32_t* host_ids) override;

  std::unique_ptr<Decider> make_decider() override;

  void configure_kv(KvOptions& o, int64_t context) override;
  void synchronize() override;
  void fill_uniform(Tensor& t, uint64_t seed, float scale, float offset) override;

  Tensor synthetic_packed(DType fmt, Shape s, uint64_t seed, float amax) override;

  void set_profiling(bool on) override { marks_.set_profiling(on); }
  void stage(const char* name) override { marks_.mark(name, stream_, graph_.capturing()); }
  std::vector<std::pair<std::string, double>> take_stage_times() override { return marks_.take(stream_); }
  std::string device_name() const override { return current_device_name(); }
  void profiler_range(bool on) override;
  size_t peak_memory() const override { return pool_peak_bytes() + ctx_->arena.region_bytes(); }
  MemoryInfo memory_info() const override { return device_memory_info(); }

 private:
  void place_fp8_side_by_side(std::span<Tensor* const> ts);  // place_side_by_side of fp8 weights
  void move_into(std::span<Tensor* const> ts, const Tensor& all, const std::function<int64_t(const Tensor&)>& stride);
  void launch_residual_norms(const Tensor& h, const Tensor& attn, const Tensor& w_post, Tensor& h1,
                             std::span<const Tensor* const> w, std::span<Tensor* const> out, RawRowScales raw,
                             RowCodesOut codes0 = {}, MoeInputsOut moe = {});
  // The tail's NextNormOut for `next` where the tail's kernel writes the next layer's input norm of out (bf16 rows,
  // CudaKernels::next_norm_fused, its buffers fit); none otherwise.
  NextNormOut next_norm_out(InputNorm* next, const Tensor& out) const;
  // The main stream waits for a routing issued ahead (moe_route_ahead), if one is pending.
  void join_route();
  // The pending routing's join where `in` holds it (the MoE path waits for it and takes it), else null.
  cudaEvent_t routed(const MoeInputs* in) const;
  // After a tail launched with `nn`: next says what it filled.
  void next_norm_done(InputNorm* next, const NextNormOut& nn);
  // A [rows] RowStats buffer on the device filled by `run`, copied to host_stats; the stream synchronised.
  void stats_to_host(int64_t rows, RowStats* host_stats, const std::function<Status(RowStats*)>& run);
  static int64_t tensor_rows(const Tensor& t) { return t.numel() / t.shape[t.shape.rank - 1]; }
  static int64_t tensor_cols(const Tensor& t) { return t.shape[t.shape.rank - 1]; }
  CublasCtx blas_ctx() {
    return CublasCtx{blas_,       stream_, [this](DType t, Shape sh) { return device(t, sh); }, fp8_.get(),
                     kernels_.a8_linears_stream, kernels_.dense_stream, linear_act8_, kernels_.a8_scales_on_load,
                     kernels_.soft_probs_loads};
  }
  // Whether dense attention at this head dim runs the flash kernels (and so reads fresh rows as f16).
  bool flash_for(int64_t head_dim) const {
    return kernels_.attention == AttentionKernel::kFlash && attention_flash_supports(head_dim);
  }
  // The flash kernels read fresh keys and values as f16, as the cache holds them: qkv_heads' FreshKvCopy as it is,
  // bf16 rows converted.
  Tensor as_f16(const Tensor& t);
  const float* device_inv_freq(const std::vector<float>& f);

  float eps_;
  CudaKernels kernels_;
  bool linear_act8_;  // fp8 linears take fp8 activations (BackendOptions::linear_act8)
  uint64_t row_codes_filled_ = 0;  // RowCodes the producers below filled (row_codes_filled)
  uint64_t input_norms_filled_ = 0;  // the tails' InputNorms (input_norms_filled)
  uint64_t routes_ahead_ = 0;        // moe_route_ahead's routings (routes_ahead)
  uint64_t experts_ahead_ = 0;       // those that issued the expert products too (experts_ahead)
  bool wgmma_ = false;  // head dims 256 and 512 take the wgmma flash blocks (attention_wgmma resolved on the device)
  std::shared_ptr<StreamCtx> ctx_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  std::unique_ptr<Fp8Gemm> fp8_;
  std::map<const float*, Tensor> inv_freq_;  // keyed by the model's per-layer host vectors (stable addresses)
  StageMarks marks_;
  static constexpr size_t kBlasWorkspace = size_t{32} << 20;
  void* blas_ws_ = nullptr;
  cudaStream_t branch_stream_ = nullptr;  // where sc_survivors > 0: the survivor path's graph branch
  cublasHandle_t branch_blas_ = nullptr;
  unsigned* route_ticket_ = nullptr;  // moe_route_group_cuda's: 0 between launches, which never overlap
  cudaStream_t route_stream_ = nullptr;  // moe_route_ahead's stream, handle, workspace, fork and join
  cublasHandle_t route_blas_ = nullptr;
  void* route_ws_ = nullptr;
  cudaEvent_t route_fork_ = nullptr, route_join_ = nullptr;
  bool route_pending_ = false;  // a routing issued ahead that the main stream has not waited for
  StepGraph graph_;
  int32_t* ids_staging_ = nullptr;  // pinned, so graph replays and uploads never read pageable memory
  size_t ids_capacity_ = 0;
  cudaEvent_t ids_done_ = nullptr;
};

}  // namespace dg
