#include "backend/cuda/cuda_decider.h"

#include <algorithm>
#include <vector>

#include "backend/cuda/host_check.h"
#include "core/error.h"
#include "ops/decide/decide_cuda.h"
#include "ops/row_stats/row_stats_cuda.h"

namespace dg {
namespace {

using cuda_host::check;

class CudaDecider final : public Decider {
 public:
  CudaDecider(cudaStream_t s, std::function<Tensor(DType, Shape)> alloc, RowStatsForm form)
      : s_(s), alloc_(std::move(alloc)), form_(form) {
    check(cudaMallocHost(&status_host_, sizeof(DecideStatus)), "cudaMallocHost");
  }
  ~CudaDecider() override {
    cudaStreamSynchronize(s_);
    cudaFreeHost(status_host_);
  }

  void start(const DecideParams& p, std::span<const int32_t> canvas, uint64_t lcg,
             std::span<const LcgJump> jump) override {
    DG_CHECK(p.rows > 0 && canvas.size() == static_cast<size_t>(p.rows) && jump.size() >= 2 * canvas.size(),
             "decide: a canvas of {} for {} rows and {} jumps", canvas.size(), p.rows, jump.size());
    const int64_t n = p.rows;
    if (n != p_.rows || p.history != p_.history) {
      ids_ = alloc_(DType::kI32, Shape{n});
      stats_ = bytes(n * static_cast<int64_t>(sizeof(RowStats)));
      u_ = bytes(n * 8);
      drawn_ = alloc_(DType::kI32, Shape{n});
      jump_ = bytes(2 * n * static_cast<int64_t>(sizeof(LcgJump)));
      history_ = alloc_(DType::kI32, Shape{std::max<int64_t>(1, p.history * n)});
      prev_accept_ = bytes(n);
      state_ = bytes(sizeof(DecideState));
      status_ = bytes(sizeof(DecideStatus));
    }
    p_ = p;
    // Pageable sources: the copies return once the data is staged, so the spans may go away after this call.
    check(cudaMemcpyAsync(ids_.data, canvas.data(), canvas.size() * 4, cudaMemcpyHostToDevice, s_), "canvas upload");
    check(cudaMemcpyAsync(jump_.data, jump.data(), 2 * canvas.size() * sizeof(LcgJump), cudaMemcpyHostToDevice, s_),
          "jump upload");
    check(decide_start_cuda(p_, lcg, buffers(), s_));
  }
  const Tensor& ids() const override { return ids_; }

  DecideStatus step(const Tensor& logits, float temperature, Tensor& tempered) override {
    return run(logits, nullptr, temperature, tempered);
  }
  DecideStatus step_open(Tensor& logits, const OpenLogits& open, float temperature, Tensor& tempered) override {
    return run(logits, open.open ? &open : nullptr, temperature, tempered);
  }
  void read_stats(RowStats* host) override { read(host, stats_.data, static_cast<size_t>(p_.rows) * sizeof(RowStats)); }
  void read_canvas(int32_t* host) override { read(host, ids_.data, static_cast<size_t>(p_.rows) * 4); }

 private:
  // The statistics (finishing open logits as they are read, stored back where the draws read them), the draws, the
  // decisions.
  DecideStatus run(const Tensor& logits, const OpenLogits* open, float temperature, Tensor& tempered) {
    const int64_t rows = logits.shape[0], V = logits.shape[1];
    DG_CHECK(rows == p_.rows, "decide: logits of {} rows for a canvas of {}", rows, p_.rows);
    RowStats* st = static_cast<RowStats*>(stats_.data);
    if (open != nullptr) {
      const OpenLogitsIn in{open->row_scale.empty() ? nullptr : open->row_scale.f32(), open->col_scale, open->cap,
                            p_.categorical};
      check(row_stats_open_cuda(static_cast<float*>(logits.data), rows, V, in, temperature, tempered.data, st, s_,
                                form_));
    } else {
      check(row_stats_cuda(logits.f32(), rows, V, temperature, tempered.data, st, s_, form_));
    }
    if (p_.categorical) {
      check(decide_uniforms_cuda(p_, buffers(), static_cast<double*>(u_.data), s_));
      check(categorical_cuda(logits.f32(), rows, V, temperature, static_cast<const double*>(u_.data),
                             drawn_.as<int32_t>(), s_));
    }
    check(decide_cuda(p_, buffers(), st, drawn_.as<int32_t>(), ids_.as<int32_t>(),
                      static_cast<DecideStatus*>(status_.data), s_));
    check(cudaMemcpyAsync(status_host_, status_.data, sizeof(DecideStatus), cudaMemcpyDeviceToHost, s_),
          "status copy");
    check(cudaStreamSynchronize(s_), "decide sync");
    return *status_host_;
  }
  Tensor bytes(int64_t n) { return alloc_(DType::kU8, Shape{n}); }
  void read(void* host, const void* dev, size_t n) {
    check(cudaMemcpyAsync(host, dev, n, cudaMemcpyDeviceToHost, s_), "decide read");
    check(cudaStreamSynchronize(s_), "decide read sync");
  }
  DecideBuffers buffers() {
    return DecideBuffers{static_cast<DecideState*>(state_.data), history_.as<int32_t>(),
                         static_cast<uint8_t*>(prev_accept_.data), static_cast<const LcgJump*>(jump_.data)};
  }

  cudaStream_t s_;
  std::function<Tensor(DType, Shape)> alloc_;
  RowStatsForm form_;
  DecideParams p_;
  Tensor ids_, stats_, u_, drawn_, jump_, history_, prev_accept_, state_, status_;
  DecideStatus* status_host_ = nullptr;  // pinned
};

}  // namespace

std::unique_ptr<Decider> make_cuda_decider(cudaStream_t stream, std::function<Tensor(DType, Shape)> alloc,
                                           RowStatsForm form) {
  return std::make_unique<CudaDecider>(stream, std::move(alloc), form);
}

}  // namespace dg
