// dg_gemm_probe: how fast cuBLAS runs the dense linears of one 26B-A4B denoise step (canvas rows x the model's
// weight shapes, bf16 in, f32 accumulation, as CudaBackend::gemm_xwt calls it), alone and in the groups that share
// an input: q/k/v and gate/up one after another, concurrently on separate streams, and as one GEMM over the
// concatenated weights. A diagnosis tool for choosing the next optimisation (docs/CUDA.md), not a benchmark result.
//
// Usage: dg_gemm_probe [--rows 256] [--reps 200]   (JSON lines on stdout)
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "probe_common.h"

namespace {

using dg_probe::ok;
using dg_probe::time_ms;

struct Lane {  // a stream with its own cuBLAS handle and workspace
  cudaStream_t stream{};
  cublasHandle_t blas{};
  Lane() {
    ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
    ok(cublasCreate(&blas), "cublasCreate");
    ok(cublasSetStream(blas, stream), "cublasSetStream");
    void* ws = nullptr;
    ok(cudaMalloc(&ws, 32 << 20), "workspace");
    ok(cublasSetWorkspace(blas, ws, 32 << 20), "cublasSetWorkspace");
  }
};

struct Gemm {
  const char* name;
  int n, k;
  bool f32_out = false;
};

constexpr size_t kWeightBytes = size_t{262144} * 2816 * 2;  // the lm_head's, the largest weight

// y[M, N] = x[M, K] W[N, K]^T. W is taken from a rotating window of the weight buffer, so repetitions read HBM, not
// the 50 MB L2 (as a step does: each weight is read once).
void gemm(const Lane& l, const void* x, int m, const Gemm& g, const void* w_base, void* y) {
  static size_t call = 0;
  const size_t bytes = size_t{2} * g.n * g.k, slots = kWeightBytes / std::max<size_t>(bytes, 64 << 20);
  const void* w = static_cast<const char*>(w_base) + (call++ % slots) * std::max<size_t>(bytes, 64 << 20);
  const float one = 1.0f, zero = 0.0f;
  ok(cublasGemmEx(l.blas, CUBLAS_OP_T, CUBLAS_OP_N, g.n, m, g.k, &one, w, CUDA_R_16BF, g.k, x, CUDA_R_16BF, g.k,
                  &zero, y, g.f32_out ? CUDA_R_32F : CUDA_R_16BF, g.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
     g.name);
}

void* dev(size_t bytes) {
  void* p = nullptr;
  ok(cudaMalloc(&p, bytes), "cudaMalloc");
  ok(cudaMemset(p, 0, bytes), "cudaMemset");
  return p;
}


}  // namespace

int main(int argc, char** argv) {
  int rows = 256, reps = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rows")) rows = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: dg_gemm_probe [--rows 256] [--reps 200]\n");
      return 2;
    }
  }
  int n_dev = 0;
  if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev == 0) {
    std::fprintf(stderr, "dg_gemm_probe needs an NVIDIA GPU\n");
    return 1;
  }
  const int H = 2816, I = 2112, D = 256, DG = 512;
  const Gemm q{"q", 16 * D, H}, k{"k", 8 * D, H}, v{"v", 8 * D, H}, o{"o", H, 16 * D};
  const Gemm qg{"q global", 16 * DG, H}, kg{"k global", 2 * DG, H}, og{"o global", H, 16 * DG};
  const Gemm gate{"gate", I, H}, up{"up", I, H}, down{"down", H, I}, router{"router", 128, H};
  const Gemm qkv{"qkv fused", q.n + k.n + v.n, H}, gu{"gate_up fused", 2 * I, H};
  const Gemm lm{"lm_head", 262144, H, true};
  Lane lanes[3];
  void* x = dev(static_cast<size_t>(rows) * 16 * DG * 2);
  void* w = dev(kWeightBytes);
  std::vector<void*> y;
  for (int i = 0; i < 3; ++i) y.push_back(dev(static_cast<size_t>(rows) * 262144 * 4 / (i == 0 ? 1 : 8)));
  auto line = [&](const std::string& what, double ms, double flop, double bytes) {
    std::printf("{\"probe\":\"%s\",\"rows\":%d,\"us\":%.2f,\"tflops\":%.1f,\"weight_gbps\":%.0f}\n", what.c_str(),
                rows, ms * 1e3, flop / ms / 1e9, bytes / ms / 1e6);
  };
  auto one = [&](const Gemm& g) {
    const double ms = time_ms(lanes[0].stream, reps, [&](int) { gemm(lanes[0], x, rows, g, w, y[0]); });
    line(g.name, ms, 2.0 * rows * g.n * g.k, 2.0 * g.n * g.k);
  };
  for (const Gemm* g : {&q, &k, &v, &o, &qg, &kg, &og, &gate, &up, &down, &router, &qkv, &gu, &lm}) one(*g);

  cudaEvent_t fork, join[2];
  ok(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), "event");
  for (auto& j : join) ok(cudaEventCreateWithFlags(&j, cudaEventDisableTiming), "event");
  auto group = [&](const std::string& name, std::vector<const Gemm*> gs) {
    double flop = 0, bytes = 0;
    for (const Gemm* g : gs) flop += 2.0 * rows * g->n * g->k, bytes += 2.0 * g->n * g->k;
    const double seq = time_ms(lanes[0].stream, reps, [&](int) {
      for (size_t i = 0; i < gs.size(); ++i) gemm(lanes[0], x, rows, *gs[i], w, y[i]);
    });
    line(name + " one stream", seq, flop, bytes);
    const double par = time_ms(lanes[0].stream, reps, [&](int) {
      ok(cudaEventRecord(fork, lanes[0].stream), "fork");
      for (size_t i = 1; i < gs.size(); ++i) ok(cudaStreamWaitEvent(lanes[i].stream, fork), "wait fork");
      for (size_t i = 0; i < gs.size(); ++i) gemm(lanes[i], x, rows, *gs[i], w, y[i]);
      for (size_t i = 1; i < gs.size(); ++i) {
        ok(cudaEventRecord(join[i - 1], lanes[i].stream), "join");
        ok(cudaStreamWaitEvent(lanes[0].stream, join[i - 1]), "wait join");
      }
    });
    line(name + " " + std::to_string(gs.size()) + " streams", par, flop, bytes);
  };
  group("q,k,v", {&q, &k, &v});
  group("q,k global", {&qg, &kg});
  group("gate,up", {&gate, &up});
  return 0;
}
