// The CUDA backend's host copies (see host_copies.h).
#include "backend/cuda/host_copies.h"

#include <cstdint>
#include <vector>

#include "backend/cuda/host_check.h"
#include "core/dtype.h"

namespace dg {

using cuda_host::check;

void device_to_host_f32(const Tensor& t, float* dst, cudaStream_t s) {
  const size_t n = static_cast<size_t>(t.numel());
  if (t.dtype == DType::kF32) {
    check(cudaMemcpyAsync(dst, t.data, n * 4, cudaMemcpyDeviceToHost, s), "copy_to_host");
    check(cudaStreamSynchronize(s), "copy_to_host sync");
    return;
  }
  std::vector<uint16_t> h(n);
  check(cudaMemcpyAsync(h.data(), t.data, n * 2, cudaMemcpyDeviceToHost, s), "copy_to_host");
  check(cudaStreamSynchronize(s), "copy_to_host sync");
  convert_to_f32(h.data(), t.dtype, n, dst);
}

void host_f32_to_device(const float* src, Tensor& t, cudaStream_t s) {
  const size_t n = static_cast<size_t>(t.numel());
  if (t.dtype == DType::kF32) {
    check(cudaMemcpyAsync(t.data, src, n * 4, cudaMemcpyHostToDevice, s), "copy_from_host");
  } else {
    std::vector<uint16_t> h(n);
    for (size_t i = 0; i < n; ++i) h[i] = t.dtype == DType::kBF16 ? f32_to_bf16(src[i]) : f32_to_f16(src[i]);
    check(cudaMemcpyAsync(t.data, h.data(), n * 2, cudaMemcpyHostToDevice, s), "copy_from_host");
  }
  check(cudaStreamSynchronize(s), "copy_from_host sync");
}

}  // namespace dg
