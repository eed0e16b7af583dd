// dg_read_probe: how fast the GPU reads a weight matrix in the order an expert kernel walks it. Each CTA owns blocks
// of 256 rows of a [rows, row_bytes] matrix and reads them stage by stage, a stage being `stage` bytes of each row:
// as stored (rows row_bytes apart, the pieces 64 or 128 bytes long) or tiled (the block's stage one contiguous run);
// whole stages only (a row's last, shorter piece is left out).
// Streaming loads, eight 16-byte loads in flight a thread, one or two CTAs of 512 threads an SM. A diagnosis tool
// (docs/EXPERTS.md, "q4 in stage tiles"), not a benchmark result.
//
// Usage: dg_read_probe   (one line a case on stdout)
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

void ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "dg_read_probe: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

__global__ void __launch_bounds__(512, 1)
    walk(const uint8_t* m, int blocks, int row_bytes, int stage, bool tiled, uint4* sink) {
  const int chunks = stage / 16, per_stage = 256 * chunks, total = row_bytes / stage * per_stage;
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (int b = static_cast<int>(blockIdx.x); b < blocks; b += static_cast<int>(gridDim.x)) {
    const uint8_t* base = m + static_cast<size_t>(b) * 256 * row_bytes;
    for (int i0 = 0; i0 < total; i0 += 8 * 512) {
      uint4 v[8];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const int i = i0 + u * 512 + static_cast<int>(threadIdx.x), s = i / per_stage, g = i % per_stage;
        const size_t off = tiled ? static_cast<size_t>(s) * per_stage * 16 + static_cast<size_t>(g) * 16
                                 : static_cast<size_t>(g / chunks) * row_bytes + static_cast<size_t>(s) * stage +
                                       static_cast<size_t>(g % chunks) * 16;
        v[u] = i < total ? __ldcs(reinterpret_cast<const uint4*>(base + off)) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) acc = make_uint4(acc.x ^ v[u].x, acc.y ^ v[u].y, acc.z ^ v[u].z, acc.w ^ v[u].w);
    }
  }
  if (acc.x == 0x12345678u) sink[threadIdx.x] = acc;  // never, but the loads are kept
}

}  // namespace

int main() {
  int sms = 0;
  ok(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "device");
  const size_t bytes = size_t{512} << 20;
  uint8_t* m = nullptr;
  uint4* sink = nullptr;
  ok(cudaMalloc(&m, bytes), "cudaMalloc");
  ok(cudaMalloc(&sink, 512 * sizeof(uint4)), "cudaMalloc");
  ok(cudaMemset(m, 1, bytes), "cudaMemset");
  cudaEvent_t a, e;
  ok(cudaEventCreate(&a), "event");
  ok(cudaEventCreate(&e), "event");
  struct Case {
    int row_bytes, stage;
    bool tiled;
    const char* what;
  };
  const Case cases[] = {{1408, 64, false, "q4 gate/up (K 2816): 64 B a row a stage, as stored"},
                        {1408, 64, true, "q4 gate/up: tiled"},
                        {352, 64, false, "q4 down (K 704): 64 B a row a stage, as stored"},
                        {352, 64, true, "q4 down: tiled"},
                        {2816, 128, false, "fp8 gate/up: 128 B a row a stage, as stored"},
                        {2816, 128, true, "fp8 gate/up: tiled"}};
  for (const Case& c : cases) {
    const int blocks = static_cast<int>(bytes / (size_t{256} * c.row_bytes));
    const double moved = 256.0 * blocks * (c.row_bytes / c.stage * c.stage);  // whole stages
    for (int grid : {sms, 2 * sms}) {
      float best = 1e9f;
      for (int rep = 0; rep < 6; ++rep) {
        ok(cudaEventRecord(a), "record");
        walk<<<grid, 512>>>(m, blocks, c.row_bytes, c.stage, c.tiled, sink);
        ok(cudaEventRecord(e), "record");
        ok(cudaEventSynchronize(e), "walk");
        float ms = 0;
        ok(cudaEventElapsedTime(&ms, a, e), "elapsed");
        if (rep > 0 && ms < best) best = ms;  // the first run warms up
      }
      std::printf("%-52s %3d CTAs: %.3f ms, %.2f TB/s\n", c.what, grid, best, moved / best / 1e9);
    }
  }
  return 0;
}
