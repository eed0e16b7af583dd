// dg_gemm_fp8_probe: is there an e4m3 product in cuBLASLt that reads the W8A8 linears' weights near their floor at a
// denoise step's row counts? For each dense linear of a 26B-A4B layer (y[M, N] = x[M, K] W[N, K]^T, e4m3 x and W,
// bf16 output, f32 accumulation, the "TN" form Fp8Gemm::run_bf16 uses) it times the algorithm Fp8Gemm takes (the
// heuristic's first) and then every configuration it can find: the heuristic's 64 best, the heuristic limited to
// each algorithm id, and each of those with other split-K counts (parts summed in f32) and thread-block cluster
// shapes, kept where cublasLtMatmulAlgoCheck accepts them. It prints the fastest few per shape, whether each
// reproduces its own output bit for bit over two runs (a configuration the engine could fix), and cublasGemmEx's
// bf16 product of the same shape for comparison. Weights come from a rotating window larger than the L2, as in a
// step. A diagnosis tool (docs/NEGATIVE.md, docs/CUDA.md), not a benchmark result.
//
// Usage: dg_gemm_fp8_probe [--rows 256] [--reps 30] [--top 6] [--max 600]   (JSON lines on stdout)
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "probe_common.h"
#include "probe_lt.h"

namespace {

using dg_probe::ok;
using dg_probe::time_ms;

struct Config {
  cublasLtMatmulAlgo_t algo;
  size_t workspace = 0;
  double us = 0;
  bool same_as_default = false, reproducible = false;
};

constexpr size_t kPool = size_t{1} << 30;  // rotating weight window: 1 GiB, twenty times the L2
constexpr size_t kWorkspace = size_t{64} << 20;

template <class T> T cfg(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  size_t got = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&a, attr, &v, sizeof v, &got);
  return v;
}

// The configuration's identity: algorithm id, tile, stages, split-K, reduction, swizzle, custom option, inner
// shape, cluster shape.
auto key(const cublasLtMatmulAlgo_t& a) {
  return std::make_tuple(cfg<int32_t>(a, CUBLASLT_ALGO_CONFIG_ID), cfg<uint32_t>(a, CUBLASLT_ALGO_CONFIG_TILE_ID),
                         cfg<uint32_t>(a, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                         cfg<int32_t>(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                         cfg<uint32_t>(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
                         cfg<uint32_t>(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                         cfg<uint32_t>(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION),
                         cfg<uint16_t>(a, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID),
                         cfg<uint16_t>(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
}

// Fills `bytes` of device memory with e4m3 codes of moderate magnitude (exponent field 4..10), random sign and
// mantissa (64 MB made on the host, copied repeatedly).
void fill_e4m3(void* dst, size_t bytes, uint32_t seed) {
  std::vector<uint8_t> h(size_t{64} << 20);
  uint32_t st = seed;
  for (auto& v : h) {
    st = st * 1664525u + 1013904223u;
    v = static_cast<uint8_t>(((st >> 8) & 0x80) | ((4 + (st >> 12) % 7) << 3) | ((st >> 20) & 7));
  }
  for (size_t at = 0; at < bytes; at += h.size()) {
    const size_t n = std::min(bytes - at, h.size());
    ok(cudaMemcpy(static_cast<char*>(dst) + at, h.data(), n, cudaMemcpyHostToDevice), "fill");
  }
}

}  // namespace

int main(int argc, char** argv) {
  int rows = 256, reps = 30, top = 6, max_timed = 600;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rows")) rows = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--top")) top = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--max")) max_timed = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: dg_gemm_fp8_probe [--rows 256] [--reps 30] [--top 6] [--max 600]\n");
      return 2;
    }
  }
  if (!dg_probe::have_gpu("dg_gemm_fp8_probe")) return 1;
  const int DG = 512;
  cudaStream_t s;
  ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  cublasHandle_t blas;
  ok(cublasCreate(&blas), "cublasCreate");
  ok(cublasSetStream(blas, s), "cublasSetStream");
  cublasLtHandle_t lt;
  ok(cublasLtCreate(&lt), "cublasLtCreate");
  void *ws = nullptr, *pool = nullptr, *pool16 = nullptr, *x = nullptr, *x16 = nullptr, *y0 = nullptr, *y1 = nullptr;
  ok(cudaMalloc(&ws, kWorkspace), "workspace");
  ok(cublasSetWorkspace(blas, ws, kWorkspace), "cublasSetWorkspace");
  ok(cudaMalloc(&pool, kPool), "pool");
  ok(cudaMalloc(&pool16, kPool), "pool16");
  const size_t x_elems = static_cast<size_t>(rows) * 16 * DG, y_elems = static_cast<size_t>(rows) * (16 + 2) * DG;
  ok(cudaMalloc(&x, x_elems), "x");
  ok(cudaMalloc(&x16, x_elems * 2), "x16");
  ok(cudaMalloc(&y0, y_elems * 2), "y0");
  ok(cudaMalloc(&y1, y_elems * 2), "y1");
  fill_e4m3(pool, kPool, 1);
  dg_probe::fill_bf16(pool16, kPool, 3);
  fill_e4m3(x, x_elems, 2);
  dg_probe::fill_bf16(x16, x_elems * 2, 4);
  const float one = 1.0f, zero = 0.0f;
  const cudaDataType_t f8 = CUDA_R_8F_E4M3, b16 = CUDA_R_16BF;
  int ids[256];
  int n_ids = 0;
  ok(cublasLtMatmulAlgoGetIds(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, f8, f8, b16, b16, 256, ids, &n_ids), "GetIds");

  for (const dg_probe::DenseShape& g : dg_probe::layer_shapes()) {
    const size_t bytes = size_t{1} * g.n * g.k, slot = std::max<size_t>(bytes, 64 << 20);
    const size_t slots = std::max<size_t>(kPool / slot, 1);
    auto w_at = [&](int i) { return static_cast<const char*>(pool) + (static_cast<size_t>(i) % slots) * slot; };
    // cublasGemmEx, bf16 (the fp8 pack's linears): weights of 2 bytes in slots twice as large, fewer of them.
    const size_t slot16 = std::max<size_t>(bytes * 2, 64 << 20), slots16 = std::max<size_t>(kPool / slot16, 1);
    const double ms_bf16 = time_ms(s, reps, [&](int i) {
      const char* w = static_cast<const char*>(pool16) + (static_cast<size_t>(i) % slots16) * slot16;
      ok(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, g.n, rows, g.k, &one, w, CUDA_R_16BF, g.k, x16, CUDA_R_16BF,
                      g.k, &zero, y0, CUDA_R_16BF, g.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
         "cublasGemmEx");
    });

    const dg_probe::LtProblem lp(f8, b16, g.n, g.k, rows, kWorkspace, true);
    const auto op = lp.op;
    const auto la = lp.a, lb = lp.b, lc = lp.c;
    const auto pref = lp.pref;
    const uint64_t ws_bytes = kWorkspace;
    const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;

    std::vector<Config> cands;
    std::set<decltype(key(cands.front().algo))> seen;
    auto add = [&](const cublasLtMatmulAlgo_t& a) {
      if (!seen.insert(key(a)).second) return;
      cublasLtMatmulHeuristicResult_t r{};
      if (cublasLtMatmulAlgoCheck(lt, op, la, lb, lc, lc, &a, &r) != CUBLAS_STATUS_SUCCESS) return;
      if (r.workspaceSize > kWorkspace) return;
      cands.push_back({a, r.workspaceSize});
    };
    std::vector<cublasLtMatmulHeuristicResult_t> res(64);
    int n_res = 0;
    ok(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 8, res.data(), &n_res), "heuristic");
    int first = 0;
    while (first < n_res && res[first].state != CUBLAS_STATUS_SUCCESS) ++first;
    if (first == n_res) {
      std::printf("{\"shape\":\"%s\",\"rows\":%d,\"error\":\"no heuristic algorithm\"}\n", g.name, rows);
      continue;
    }
    add(res[first].algo);  // candidate 0: what Fp8Gemm runs
    ok(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 64, res.data(), &n_res), "heuristic 64");
    std::vector<cublasLtMatmulAlgo_t> bases;
    for (int i = 0; i < n_res; ++i)
      if (res[i].state == CUBLAS_STATUS_SUCCESS) bases.push_back(res[i].algo);
    const uint32_t by_id = CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID;
    for (int id = 0; id < n_ids; ++id) {
      cublasLtMatmulPreference_t p2;
      ok(cublasLtMatmulPreferenceCreate(&p2), "pref2");
      cublasLtMatmulPreferenceSetAttribute(p2, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes);
      cublasLtMatmulPreferenceSetAttribute(p2, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes);
      cublasLtMatmulPreferenceSetAttribute(p2, CUBLASLT_MATMUL_PREF_SEARCH_MODE, &by_id, sizeof by_id);
      std::vector<cublasLtMatmulHeuristicResult_t> r2(32);
      for (auto& r : r2) cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, f8, f8, b16, b16, ids[id], &r.algo);
      int n2 = 0;
      if (cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, p2, 32, r2.data(), &n2) == CUBLAS_STATUS_SUCCESS)
        for (int i = 0; i < n2; ++i)
          if (r2[i].state == CUBLAS_STATUS_SUCCESS) bases.push_back(r2[i].algo);
      cublasLtMatmulPreferenceDestroy(p2);
    }
    for (const auto& b : bases) add(b);
    const size_t heuristic_found = cands.size();
    const int32_t splits[] = {1, 2, 3, 4, 6, 8};
    const uint16_t clusters[] = {CUBLASLT_CLUSTER_SHAPE_1x1x1, CUBLASLT_CLUSTER_SHAPE_2x1x1,
                                 CUBLASLT_CLUSTER_SHAPE_1x2x1, CUBLASLT_CLUSTER_SHAPE_4x1x1,
                                 CUBLASLT_CLUSTER_SHAPE_1x4x1, CUBLASLT_CLUSTER_SHAPE_2x2x1};
    for (const auto& b : bases) {
      for (int32_t sk : splits)
        for (uint16_t cl : clusters) {
          cublasLtMatmulAlgo_t a = b;
          const uint32_t red = sk > 1 ? CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE : CUBLASLT_REDUCTION_SCHEME_NONE;
          cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &sk, sizeof sk);
          cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof red);
          cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cl, sizeof cl);
          add(a);
          if (static_cast<int>(cands.size()) >= max_timed) break;
        }
    }

    const size_t out_bytes = size_t{2} * g.n * rows;
    std::vector<char> h0(out_bytes), h1(out_bytes), h2(out_bytes);
    auto run = [&](const Config& c, const void* w, void* y) {
      return cublasLtMatmul(lt, op, &one, w, la, x, lb, &zero, y, lc, y, lc, &c.algo, ws, kWorkspace, s) ==
             CUBLAS_STATUS_SUCCESS;
    };
    auto fetch = [&](void* y, std::vector<char>& h) {
      ok(cudaMemcpyAsync(h.data(), y, out_bytes, cudaMemcpyDeviceToHost, s), "copy");
      ok(cudaStreamSynchronize(s), "sync");
    };
    run(cands[0], w_at(0), y0);
    fetch(y0, h0);
    std::vector<Config> timed;
    for (Config& c : cands) {
      bool failed = false;
      const double ms = time_ms(s, reps, [&](int i) { failed |= !run(c, w_at(i), y1); });
      if (failed || cudaGetLastError() != cudaSuccess) continue;
      c.us = ms * 1e3;
      timed.push_back(c);
    }
    if (timed.empty() || key(timed[0].algo) != key(cands[0].algo)) {
      std::printf("{\"shape\":\"%s\",\"rows\":%d,\"error\":\"the default algorithm did not run\"}\n", g.name, rows);
      continue;
    }
    std::sort(timed.begin() + 1, timed.end(), [](const Config& a, const Config& b) { return a.us < b.us; });
    const int shown = std::min<int>(static_cast<int>(timed.size()), top + 1);
    for (int i = 0; i < shown; ++i) {
      Config& c = timed[static_cast<size_t>(i)];
      run(c, w_at(0), y1);
      fetch(y1, h1);
      run(c, w_at(0), y1);
      fetch(y1, h2);
      c.same_as_default = h0 == h1;
      c.reproducible = h1 == h2;
      const auto [id, tile, stages, sk, red, swz, custom, inner, cl] = key(c.algo);
      std::printf("{\"shape\":\"%s\",\"rows\":%d,\"n\":%d,\"k\":%d,\"rank\":%s,\"id\":%d,\"tile\":%u,\"stages\":%u,"
                  "\"splitk\":%d,\"reduction\":%u,\"swizzle\":%u,\"custom\":%u,\"inner\":%u,\"cluster\":%u,"
                  "\"workspace\":%zu,\"us\":%.2f,\"weight_tbps\":%.2f,\"tflops\":%.0f,\"same_as_default\":%s,"
                  "\"reproducible\":%s}\n",
                  g.name, rows, g.n, g.k, i == 0 ? "\"default\"" : std::to_string(i).c_str(), id, tile, stages, sk,
                  red, swz, custom, static_cast<unsigned>(inner), static_cast<unsigned>(cl), c.workspace, c.us,
                  bytes / c.us / 1e6, 2.0 * rows * g.n * g.k / c.us / 1e6, c.same_as_default ? "true" : "false",
                  c.reproducible ? "true" : "false");
    }
    std::printf("{\"shape\":\"%s\",\"rows\":%d,\"summary\":true,\"bf16_gemmex_us\":%.2f,\"fp8_default_us\":%.2f,"
                "\"fp8_best_us\":%.2f,\"heuristic_configs\":%zu,\"timed\":%zu,\"algo_ids\":%d}\n",
                g.name, rows, ms_bf16 * 1e3, timed[0].us, timed.size() > 1 ? timed[1].us : timed[0].us,
                heuristic_found, timed.size(), n_ids);
    std::fflush(stdout);
  }
  return 0;
}
