// `diffgemma bench --serve`: the load benchmark of the batched generator (src/diffusion/batch.h), in process: N
// concurrent synthetic requests (fixed steps per block, every early stop off) stepped together through one
// batched forward per step, at each N of --streams. Reports aggregate committed tok/s, p50/p99 time to the first
// committed block, and achieved TFLOP/s (expert, dense, projection, attention, lm_head and exact SC GEMM FLOPs);
// then one batched step of the largest N timed alone and broken down by stage (event "serve_step").
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/forward.h"

namespace dg::cli {

struct ServeBenchOptions {
  std::vector<int> streams{1, 4, 8, 16, 32};
  int steps = 16;
  int prompt_tokens = 1024, gen_tokens = 512;
  int64_t prefill_tokens = 4096;  // encode budget per round
  int64_t logit_rows = 2048;      // lm_head chunk
  uint64_t seed = 1;
  bool profile_step = false;  // the first timed batched step inside a profiler range (--profile-range serve-step)
  double sc_cutoff = 0;       // the self-conditioning's survivor cutoff (bench --self-conditioning; 0: exact)
};

// FLOPs of one denoise forward row whose sequence holds `ctx` cached tokens (canvas `rows` wide), exact SC included.
double denoise_flops_per_row(const ModelConfig& cfg, int64_t ctx, int64_t rows);
// FLOPs of encoding `n` tokens after `ctx` cached ones (no lm_head, no SC).
double encode_flops(const ModelConfig& cfg, int64_t ctx, int64_t n);

void run_bench_serve(const Model& model, const ServeBenchOptions& o,
                     const std::function<KvCache(int64_t context)>& new_cache,
                     const std::function<void(nlohmann::json)>& emit);

}  // namespace dg::cli
