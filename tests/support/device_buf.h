// Device memory for one GPU test, freed at scope exit: a size, or a host vector copied up; `get` copies n values
// back. CUDA builds only (the test files that include it are inside `#if defined(DG_WITH_CUDA)`).
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace dg::test {

struct DeviceBuf {
  void* p = nullptr;
  explicit DeviceBuf(size_t bytes) { EXPECT_EQ(cudaMalloc(&p, bytes == 0 ? 16 : bytes), cudaSuccess); }
  template <class T>
  explicit DeviceBuf(const std::vector<T>& h) : DeviceBuf(h.size() * sizeof(T)) {
    EXPECT_EQ(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceBuf() { cudaFree(p); }
  DeviceBuf(const DeviceBuf&) = delete;
  DeviceBuf& operator=(const DeviceBuf&) = delete;
  template <class T> T* as() const { return static_cast<T*>(p); }
  template <class T> std::vector<T> get(size_t n) const {
    std::vector<T> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

}  // namespace dg::test
