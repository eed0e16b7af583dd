// Helpers shared by the cuBLAS probes (gemm_probe.cpp, gemm_lt_probe.cpp): exit with a message on a failed CUDA
// or cuBLAS call, and time a body on a stream with CUDA events.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace dg_probe {

inline void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}
inline void ok(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "%s: cuBLAS status %d\n", what, static_cast<int>(s));
    std::exit(1);
  }
}

// Milliseconds per repetition of body(i) (i counts the calls from 0), launched on `s` after five warm-up calls.
template <class F> double time_ms(cudaStream_t s, int reps, F&& body) {
  int i = 0;
  for (; i < 5; ++i) body(i);
  cudaEvent_t a, b;
  ok(cudaEventCreate(&a), "event");
  ok(cudaEventCreate(&b), "event");
  ok(cudaEventRecord(a, s), "record");
  for (int r = 0; r < reps; ++r) body(i++);
  ok(cudaEventRecord(b, s), "record");
  ok(cudaEventSynchronize(b), "sync");
  float ms = 0;
  ok(cudaEventElapsedTime(&ms, a, b), "elapsed");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / reps;
}

// False, with a message naming the tool, where no NVIDIA GPU is present.
inline bool have_gpu(const char* tool) {
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) return true;
  std::fprintf(stderr, "%s needs an NVIDIA GPU\n", tool);
  return false;
}

// A dense linear of a 26B-A4B layer: y[rows, n] = x[rows, k] W[n, k]^T.
struct DenseShape {
  const char* name;
  int n, k;
};
// The layer's projections (q/k/v as one product, o, the dense MLP's gate/up and down) of both layer kinds.
inline std::vector<DenseShape> layer_shapes() {
  const int H = 2816, I = 2112, D = 256, DG = 512;
  return {{"qkv sliding", 16 * D + 16 * D, H}, {"qk global", 16 * DG + 2 * DG, H}, {"o sliding", H, 16 * D},
          {"o global", H, 16 * DG},           {"gate_up", 2 * I, H},              {"down", H, I}};
}

// Fills `bytes` of device memory with small random bf16 values (64 MB made on the host, copied repeatedly).
inline void fill_bf16(void* dst, size_t bytes, uint32_t seed) {
  std::vector<uint16_t> h(size_t{32} << 20);
  uint32_t st = seed;
  for (auto& v : h) {
    st = st * 1664525u + 1013904223u;
    const float f = (static_cast<float>(st >> 16) / 65536.0f - 0.5f) * 0.1f;
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    v = static_cast<uint16_t>(bits >> 16);
  }
  for (size_t at = 0; at < bytes; at += h.size() * 2) {
    const size_t n = std::min(bytes - at, h.size() * 2);
    ok(cudaMemcpy(static_cast<char*>(dst) + at, h.data(), n, cudaMemcpyHostToDevice), "fill");
  }
}

}  // namespace dg_probe
