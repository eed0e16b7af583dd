// Helpers shared by the cuBLAS probes (gemm_probe.cpp, gemm_lt_probe.cpp): exit with a message on a failed CUDA
// or cuBLAS call, and time a body on a stream with CUDA events.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

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

}  // namespace dg_probe
