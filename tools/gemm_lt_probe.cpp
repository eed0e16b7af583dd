// dg_gemm_lt_probe: does cuBLASLt hold a faster kernel than the one cublasGemmEx picks for the dense linears of a
// 26B-A4B denoise step? For each shape (canvas rows x the model's fused weights, bf16 in and out, f32 accumulation,
// y[M, N] = x[M, K] W[N, K]^T as CudaBackend::gemm_xwt calls it) it times cublasGemmEx and every algorithm the
// cuBLASLt heuristic offers, and says whether each algorithm's output equals cublasGemmEx's bit for bit. Weights come
// from a rotating window larger than the L2, as in a step. A diagnosis tool (docs/CUDA.md), not a benchmark result.
//
// Usage: dg_gemm_lt_probe [--rows 256] [--reps 100] [--algos 32]   (JSON lines on stdout)
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <vector>

#include "probe_common.h"
#include "probe_lt.h"

namespace {

using dg_probe::ok;
using dg_probe::time_ms;

constexpr size_t kPool = size_t{1} << 30;   // rotating weight window: 1 GiB, twenty times the L2
constexpr size_t kWorkspace = size_t{32} << 20;

}  // namespace

int main(int argc, char** argv) {
  int rows = 256, reps = 100, want = 32;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rows")) rows = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--algos")) want = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: dg_gemm_lt_probe [--rows 256] [--reps 100] [--algos 32]\n");
      return 2;
    }
  }
  if (!dg_probe::have_gpu("dg_gemm_lt_probe")) return 1;
  const int H = 2816, DG = 512;
  std::vector<dg_probe::DenseShape> shapes = dg_probe::layer_shapes();
  shapes.insert(shapes.end(), {{"router", 128, H}, {"lm_head", 262144, H}});
  cudaStream_t s;
  ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  cublasHandle_t blas;
  ok(cublasCreate(&blas), "cublasCreate");
  ok(cublasSetStream(blas, s), "cublasSetStream");
  cublasLtHandle_t lt;
  ok(cublasLtCreate(&lt), "cublasLtCreate");
  void *ws = nullptr, *pool = nullptr, *x = nullptr, *y0 = nullptr, *y1 = nullptr;
  ok(cudaMalloc(&ws, kWorkspace), "workspace");
  ok(cublasSetWorkspace(blas, ws, kWorkspace), "cublasSetWorkspace");
  ok(cudaMalloc(&pool, kPool), "pool");
  const size_t x_elems = static_cast<size_t>(rows) * 16 * DG, y_elems = static_cast<size_t>(rows) * 262144;
  ok(cudaMalloc(&x, x_elems * 2), "x");
  ok(cudaMalloc(&y0, y_elems * 2), "y0");
  ok(cudaMalloc(&y1, y_elems * 2), "y1");
  dg_probe::fill_bf16(pool, kPool, 1);
  dg_probe::fill_bf16(x, x_elems * 2, 2);
  std::vector<char> h0, h1;
  const float one = 1.0f, zero = 0.0f;

  for (const dg_probe::DenseShape& g : shapes) {
    const size_t bytes = size_t{2} * g.n * g.k, slot = std::max<size_t>(bytes, 64 << 20);
    const size_t slots = std::max<size_t>(kPool / slot, 1);
    auto w_at = [&](int i) { return static_cast<const char*>(pool) + (static_cast<size_t>(i) % slots) * slot; };
    const double ms_ex = time_ms(s, reps, [&](int i) {
      ok(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, g.n, rows, g.k, &one, w_at(i), CUDA_R_16BF, g.k, x,
                      CUDA_R_16BF, g.k, &zero, y0, CUDA_R_16BF, g.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
         "cublasGemmEx");
    });
    // Reference output: weights of slot 0.
    ok(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, g.n, rows, g.k, &one, w_at(0), CUDA_R_16BF, g.k, x, CUDA_R_16BF,
                    g.k, &zero, y0, CUDA_R_16BF, g.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
       "cublasGemmEx");
    const size_t out_bytes = size_t{2} * g.n * rows;
    h0.resize(out_bytes);
    h1.resize(out_bytes);
    ok(cudaMemcpyAsync(h0.data(), y0, out_bytes, cudaMemcpyDeviceToHost, s), "copy");
    ok(cudaStreamSynchronize(s), "sync");
    std::printf("{\"shape\":\"%s\",\"rows\":%d,\"n\":%d,\"k\":%d,\"algo\":\"gemmex\",\"us\":%.2f,\"weight_tbps\":%.2f}\n",
                g.name, rows, g.n, g.k, ms_ex * 1e3, bytes / ms_ex / 1e9);

    const dg_probe::LtProblem lp(CUDA_R_16BF, CUDA_R_16BF, g.n, g.k, rows, kWorkspace, false);
    const auto op = lp.op;
    const auto la = lp.a, lb = lp.b, lc = lp.c;
    const auto pref = lp.pref;
    std::vector<cublasLtMatmulHeuristicResult_t> res(static_cast<size_t>(want));
    int n_res = 0;
    ok(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, want, res.data(), &n_res), "heuristic");
    double best = 1e30;
    int best_i = -1;
    for (int a = 0; a < n_res; ++a) {
      const cublasLtMatmulAlgo_t& algo = res[static_cast<size_t>(a)].algo;
      bool failed = false;
      auto run = [&](int i, void* y) {
        if (cublasLtMatmul(lt, op, &one, w_at(i), la, x, lb, &zero, y, lc, y, lc, &algo, ws, kWorkspace, s) !=
            CUBLAS_STATUS_SUCCESS)
          failed = true;
      };
      const double ms = time_ms(s, reps, [&](int i) { run(i, y1); });
      run(0, y1);
      ok(cudaMemcpyAsync(h1.data(), y1, out_bytes, cudaMemcpyDeviceToHost, s), "copy");
      ok(cudaStreamSynchronize(s), "sync");
      const bool same = std::memcmp(h0.data(), h1.data(), out_bytes) == 0;
      int tile = -1, stages = -1, splitk = -1, cluster = -1, algo_id = -1;
      size_t got = 0;
      cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &algo_id, sizeof algo_id, &got);
      cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &got);
      cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &got);
      cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &got);
      cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster,
                                           &got);
      std::printf("{\"shape\":\"%s\",\"rows\":%d,\"algo\":%d,\"id\":%d,\"tile\":%d,\"stages\":%d,\"splitk\":%d,"
                  "\"cluster\":%d,\"workspace\":%zu,\"us\":%.2f,\"weight_tbps\":%.2f,\"same_bits\":%s%s}\n",
                  g.name, rows, a, algo_id, tile, stages, splitk, cluster, res[static_cast<size_t>(a)].workspaceSize,
                  ms * 1e3, bytes / ms / 1e9, same ? "true" : "false", failed ? ",\"failed\":true" : "");
      if (!failed && ms < best) best = ms, best_i = a;
    }
    std::printf("{\"shape\":\"%s\",\"rows\":%d,\"summary\":true,\"gemmex_us\":%.2f,\"best_us\":%.2f,\"best\":%d,"
                "\"offered\":%d}\n",
                g.name, rows, ms_ex * 1e3, best * 1e3, best_i, n_res);
    std::fflush(stdout);
  }
  return 0;
}
