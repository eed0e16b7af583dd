// The CUDA backend's kernel choices, typed (benchmarks and tests compare them; the defaults are the measured
// winners, docs/CUDA.md), with the names the command line spells them by. Plain C++: CPU builds parse the options
// too, and the registry (src/backend/registry.h) carries them to the backend.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "core/error.h"

namespace dg {

// flash: fused tensor-core kernel (head dims 16..512, powers of two; others take gemm) | gemm: gathered keys +
// cuBLAS batched GEMMs + masked softmax | warp: SIMT per row
enum class AttentionKernel : uint8_t { kFlash, kGemm, kWarp };
// auto: q4 (kernel layout) in ws where it runs (Hopper), at every size; for calls of at least moe_auto_rows tokens
// (large batches, prefill chunks) wide where the experts' format has it (bf16, W8A8), and from twice as many ws where
// it runs; cublas for other unpacked experts outside graph captures; stream otherwise | stream: our
// weight-streaming kernel, no host sync (docs/CUDA.md) | cublas: cublasGemmGroupedBatchedEx (host sync per layer) |
// wmma: our first grouped kernel (slower, NEGATIVE.md) | wide: the streaming kernel in passes of 128 rows for bf16
// and W8A8 experts (other packed experts stream as with stream) | ws: wide, with the W8A8, bf16 and q4 experts'
// products in the persistent warp-specialised kernels (src/ops/moe/moe_ws.cu, moe_ws_q4.cu; Hopper only, an error
// elsewhere)
enum class MoeKernel : uint8_t { kAuto, kStream, kCublas, kWmma, kWide, kWs };
// device: the decide kernel (src/ops/decide; one 32-byte status read per step) | host: the sampler's per-step
// decisions run on the host (row statistics and draws read each step). Same tokens either way (docs/CUDA.md).
enum class DecideMode : uint8_t { kDevice, kHost };
// A batched step's attention (several sequences): auto: one flash launch over all of them when their query tiles
// fill a wave of the GPU, else one call per sequence | one: always one launch | each: always one call per sequence
enum class SegmentsMode : uint8_t { kAuto, kOne, kEach };
// flash, head dims 256 and 512: the Hopper wgmma blocks (src/ops/attention/flash_wgmma.cuh, flash_wgmma512.cuh).
// auto: where the device runs the library's sm_90a code (an H100/H200 with the default build), else the mma.sync
// blocks | on: always (an error where it cannot run) | off: never
enum class WgmmaMode : uint8_t { kAuto, kOn, kOff };
// W8A8 products of at most 256 activation rows (a single sequence's step): cublaslt: cuBLASLt's e4m3 product |
// own: our kernel (src/ops/linear/e4m3_rows_cuda.h: 128 weight rows a CTA against every activation row, K split over
// a cluster) for the products with bf16 outputs (q/k/v, o, the dense and self-conditioning gate/up, the dense down) |
// all: also those with f32 outputs (the fp8 vocabulary products, the self-conditioning down). Hopper only; calls the
// kernel does not take stay with cuBLASLt.
enum class A8RowsMode : uint8_t { kCublasLt, kOwn, kAll };

struct CudaKernels {
  AttentionKernel attention = AttentionKernel::kFlash;
  MoeKernel moe = MoeKernel::kAuto;
  int64_t moe_auto_rows = 1024;
  DecideMode decide = DecideMode::kDevice;
  // flash: output columns per block, 128 or 256 (a head dim above it recomputes the scores once per column slice)
  int attention_cols = 256;
  // flash: head dims from this one up (256 or 512; 0: none) run the warp-pair block, which computes the scores once
  // for all columns (src/ops/attention/flash_pair.cuh)
  int attention_pairs = 512;
  SegmentsMode attention_segments = SegmentsMode::kAuto;
  // flash, head dims 256 and 512: the Hopper wgmma blocks (WgmmaMode above); other head dims keep the blocks above.
  // The 256 block measured faster on the H200 (docs/ATTENTION.md, "wgmma flash block"); the 512 block not yet run on a GPU
  WgmmaMode attention_wgmma = WgmmaMode::kAuto;
  // W8A8 experts (fp8 weights and activations): pipeline stages of the streaming kernel, 3 (three CTAs per SM) or 4
  // (two); 3 measured faster on the H200 (expert GEMMs 8.33 against 9.53 ms per step, docs/CUDA.md)
  int moe_a8_stages = 3;
  // q4 experts in the kernel layout: pipeline stages of the streaming kernel, 2, 3 or 4 (docs/CUDA.md)
  int moe_q4_stages = 2;
  // The streaming expert kernel's column tiles per CTA, streamed as one pipeline (moe_stream_gemm_cuda's col_tiles),
  // for the gate/up and the down products (the passes of 128 rows, --moe wide, always 1). 0 for the down product:
  // 2 for W8A8 experts (whose short K, 5.5 stages a tile at 704, leaves a CTA little between its first copies and
  // its epilogue), 1 for the others (bf16 measured slower with 2; docs/EXPERTS.md, "Column tiles")
  int moe_up_col_tiles = 1;
  int moe_down_col_tiles = 0;
  // q4 experts in the warp-specialised kernel (Hopper): consumer warpgroups, 2 (two m64 weight tiles each) or 4 (one
  // each, twice the converting warps; the same bits). 4 measured slower on the H200 (expert products 6.41 -> 6.62 ms a
  // one-canvas step; docs/NEGATIVE.md), kept as the A/B
  int moe_q4_consumers = 2;
  // The residual chains (residual_norms, ffn_tail) and the per-head norm + RoPE as one kernel each; false: the
  // composed ops (A/B)
  bool fused_norms = true;
  // The fused per-head norms of calls of at least this many rows read each row's rotation from a table made once per
  // call (rope_table_cuda) instead of every head computing its sincos (the same bits). Measured on the H200: the
  // 32-canvas step's attention stage 38.75 -> 37.65 ms, the single canvas's step 12.24 -> 12.34 (the table's launch
  // costs more than the sincos it saves at 256 rows); docs/PERFORMANCE-12-04.md, fourteenth session
  int64_t rope_table_rows = 1024;
  // The MoE grouping of more than 8,192 routed pairs (batched steps, prefill) by blocks of 2,048 pairs in three
  // launches instead of one block (the same result): the 32-canvas step's MoE glue 13.1 -> 9.0 ms on the H200
  bool moe_group_blocks = true;
  // The MoE routing and grouping of up to 512 rows (128 experts) in one launch whose last block groups
  // (moe_route_group_cuda; the same bits): 7.0 + 9.4 -> 13.3 us a layer at one canvas on the H100; false: the
  // routing's and the grouping's launches (A/B)
  bool moe_route_fused = true;
  // The W8A8 MoE's inputs (the router's input and z's E4M3 rows) written by the residual chain that makes h1 and z
  // (residual_norms_cuda's MoeInputsOut) instead of a launch of their own (moe_inputs_fp8_cuda); the router's input
  // may differ by a bf16 step where the two kernels' sums of squares round apart. false: their own launch (A/B)
  bool moe_inputs_fused = true;
  // The next decoder layer's input norm (and its E4M3 rows) written by the feed-forward tail's launch, which holds
  // the row (NextNormOut; the same bytes as rmsnorm_codes_cuda) instead of a launch of their own; false: their own
  // launch (A/B)
  bool next_norm_fused = true;
  // The MoE's routing (the router's product, routing and grouping in one launch) issued on a stream of its own right
  // after the residual chain writes its input, so it runs beside the dense MLP; the block joins it before its
  // experts (Backend::moe_route_ahead; the same kernels and bits). false: in the MoE's place on the one stream (A/B)
  bool moe_route_ahead = true;
  // With moe_route_ahead, the W8A8 expert products of the streaming kernel (calls below moe_auto_rows tokens) issued
  // on the routing's stream right after it, so the dense MLP on the main stream runs beside the routing and the
  // experts instead of before the experts; the block joins them before its tail (the same kernels and bits;
  // docs/PERFORMANCE.md, forty-first session; bench --moe-experts-in-place the A/B)
  bool moe_experts_ahead = true;
  // A captured step's buffers from the backend's capture arena (core/cuda/capture_arena.h): the same addresses
  // capture after capture, so a block's graph is updated in place instead of instantiated anew; false: every buffer
  // by cudaMallocAsync, a memory node of the graph (A/B, the same bits)
  bool graph_arena = true;
  // q4 weights rearranged at upload into the streaming kernel's layout (src/ops/moe/q4_layout.h: a mask and one
  // bf16x2 fma per weight pair); false: the pack's disk layout and the older conversion (A/B, same weights)
  bool q4_kernel_layout = true;
  // q4 experts (rank-3 weights of rows a multiple of 128) for the warp-specialised kernel: the kernel layout's words in
  // stage tiles, a stage of 64 rows one contiguous run (src/ops/moe/q4_layout.h; docs/EXPERTS.md, "q4 in stage tiles");
  // false: the rows as the kernel layout stores them (A/B, the same bits). Measured on the H100: the one-canvas step
  // 12.83 -> 12.19 ms. Not with --moe stream, whose kernel reads rows
  bool q4_tiles = true;
  // fp8 experts (rank-3 weights of rows a multiple of 128) in stage tiles for both expert kernels: a stage of 64
  // rows' 128 codes one contiguous run of 8 KB (src/ops/moe/row_tiles.h; docs/EXPERTS.md, "Expert rows in stage
  // tiles"); false: the rows as the pack stores them (A/B, the same bits)
  bool fp8_tiles = true;
  // bf16 experts the same way (a stage of 64 rows' 64 weights one run of 8 KB), with --moe auto, stream, wide or ws;
  // false: the rows as stored (A/B, the same bits)
  bool bf16_tiles = true;
  // Programmatic dependent launch (compute capability 9.0 and later): each kernel's blocks launch while the kernel
  // before it finishes and wait for it on the device (src/core/cuda/launch.cuh). Off until measured; process-wide
  bool pdl = false;
  // The W8A8 linears' product: cuBLASLt's e4m3 product with a row-scaled epilogue, or (A/B, measured slower:
  // docs/NEGATIVE.md) the streaming kernel with the scales in its epilogue, 128-row passes from 65 rows.
  bool a8_linears_stream = false;
  // The W8A8 q/k/v and dense gate/up products: cuBLASLt's raw e4m3 sums as bf16, both scales applied by the kernel
  // that reads them (the per-head norms, the gated GELU) instead of f32 sums and a row-scaled pass (the other W8A8
  // linears keep the pass). The same number of bf16 roundings. Measured on the H200 (fp8-all, docs/CUDA.md): the step
  // 12.97 -> 12.44 ms at one canvas, 32 streams 2,496 -> 2,712 tok/s. a8_linears_stream, its own epilogue, takes
  // every W8A8 linear when set.
  bool a8_scales_on_load = true;
  // With a8_scales_on_load: the W8A8 inputs of q/k/v, the dense gate/up and the dense down written as E4M3 codes by
  // the launch that writes the input (the input norm, the pre-feed-forward norm, the gated GELU: RowCodes) instead of
  // a quantising launch of their own before each product. The same bytes either way.
  bool a8_row_codes = true;
  // bf16 linears of 65 rows and more through the streaming kernel in 128-row passes instead of cuBLAS (A/B, measured
  // slower: docs/NEGATIVE.md).
  bool dense_stream = false;
  // Batched steps: the lm_head's softcap (and an fp8 table's scales) applied by the row statistics as they read the
  // logits (Backend::lm_head_open, row_stats_open_cuda) instead of a pass of its own: the same bits, one read and
  // write of the f32 logits less. Measured on the H200 (fp8-all): the 32-stream step 145.7 -> 144.1 ms, 8 streams
  // 41.85 -> 41.45 (docs/CUDA.md); bench --softcap-pass is the A/B
  bool softcap_in_stats = true;
  // The same for single sequences (ModelDenoiser: ask, chat, the serial worker; their graphed steps included), with
  // softcap_in_stats: the decider's or the host's statistics finish the logits, stored back where draws read them,
  // finished on demand for JSON rows. Off until measured (bench --single-softcap-in-stats).
  bool softcap_in_stats_single = false;
  // The sampler statistics summed four entries at a time with four loads in flight (RowStatsForm::kGroups: the same
  // argmax and tempered logits, entropy and p_max within about 1e-7 relative) instead of entry by entry with two.
  // Measured on the H100: the single canvas's pass 173 -> 150 us, fp8-all 1,065 / 1,034 -> 1,072 / 1,072 committed
  // tok/s, the 32-stream sampler stage 11.0 -> 10.0 ms (docs/PERFORMANCE.md); bench --row-stats-each is the A/B.
  bool row_stats_groups = true;
  // 16-byte loads each thread of the self-conditioning probability passes keeps in flight: 1 or 4 (the same bits).
  // Four measured slower on the H100 (the two passes 76 + 81 -> 83 + 89 us at one canvas; docs/NEGATIVE.md).
  int soft_probs_loads = 1;
  // The self-conditioning soft embedding with a survivor cutoff (the contract sampler's, e^-10): the rows'
  // survivors listed, and where every row of the call has at most this many, their bf16 embedding rows summed instead
  // of the product over the whole vocabulary (soft_embeds_cuda). Outside a graph (the batched worker's steps) the host
  // reads the canvases' overflow flags together, one synchronisation a step; in a captured step a graph branch takes
  // the product where a row overflowed. 0: off, the product always (bench and golden --sc-survivors 0, the A/B).
  int sc_survivors = 512;
  // The W8A8 products of at most 256 rows (A8RowsMode above). Ours measured slower on the H100 (the fp8-all step
  // 13.84-13.88 -> 14.63-14.73 ms; docs/NEGATIVE.md), kept as the A/B
  A8RowsMode a8_rows = A8RowsMode::kCublasLt;
};

inline constexpr std::array<std::pair<std::string_view, AttentionKernel>, 3> kAttentionKernelNames{
    {{"flash", AttentionKernel::kFlash}, {"gemm", AttentionKernel::kGemm}, {"warp", AttentionKernel::kWarp}}};
inline constexpr std::array<std::pair<std::string_view, MoeKernel>, 6> kMoeKernelNames{
    {{"auto", MoeKernel::kAuto}, {"stream", MoeKernel::kStream}, {"cublas", MoeKernel::kCublas},
     {"wmma", MoeKernel::kWmma}, {"wide", MoeKernel::kWide}, {"ws", MoeKernel::kWs}}};
inline constexpr std::array<std::pair<std::string_view, DecideMode>, 2> kDecideModeNames{
    {{"device", DecideMode::kDevice}, {"host", DecideMode::kHost}}};
inline constexpr std::array<std::pair<std::string_view, SegmentsMode>, 3> kSegmentsModeNames{
    {{"auto", SegmentsMode::kAuto}, {"one", SegmentsMode::kOne}, {"each", SegmentsMode::kEach}}};
inline constexpr std::array<std::pair<std::string_view, WgmmaMode>, 3> kWgmmaModeNames{
    {{"auto", WgmmaMode::kAuto}, {"on", WgmmaMode::kOn}, {"off", WgmmaMode::kOff}}};
inline constexpr std::array<std::pair<std::string_view, A8RowsMode>, 3> kA8RowsModeNames{
    {{"cublaslt", A8RowsMode::kCublasLt}, {"own", A8RowsMode::kOwn}, {"all", A8RowsMode::kAll}}};

// The name of a choice in one of the tables above.
template <class E, size_t N>
std::string_view kernel_name(const std::array<std::pair<std::string_view, E>, N>& names, E e) {
  for (const auto& [n, v] : names)
    if (v == e) return n;
  return "?";
}
inline std::string_view kernel_name(AttentionKernel k) { return kernel_name(kAttentionKernelNames, k); }
inline std::string_view kernel_name(MoeKernel k) { return kernel_name(kMoeKernelNames, k); }
inline std::string_view kernel_name(DecideMode k) { return kernel_name(kDecideModeNames, k); }
inline std::string_view kernel_name(SegmentsMode k) { return kernel_name(kSegmentsModeNames, k); }
inline std::string_view kernel_name(WgmmaMode k) { return kernel_name(kWgmmaModeNames, k); }
inline std::string_view kernel_name(A8RowsMode k) { return kernel_name(kA8RowsModeNames, k); }

// The choice named `name` in a table; throws dg::Error naming `what` and the names it knows.
template <class E, size_t N>
E kernel_from_name(const std::array<std::pair<std::string_view, E>, N>& names, std::string_view name,
                   std::string_view what) {
  std::string known;
  for (const auto& [n, v] : names) {
    if (n == name) return v;
    known += (known.empty() ? "" : ", ") + std::string(n);
  }
  fail("unknown {} '{}': expected {}", what, name, known);
}

// Throws dg::Error naming the option whose number is out of range.
inline void check_kernels(const CudaKernels& k) {
  DG_CHECK(k.attention_cols == 128 || k.attention_cols == 256, "--attention-cols must be 128 or 256, not {}",
           k.attention_cols);
  DG_CHECK(k.attention_pairs == 0 || k.attention_pairs == 256 || k.attention_pairs == 512,
           "--attention-pairs must be 0, 256 or 512, not {}", k.attention_pairs);
  DG_CHECK(k.moe_a8_stages == 3 || k.moe_a8_stages == 4, "--moe-a8-stages must be 3 or 4, not {}", k.moe_a8_stages);
  DG_CHECK(k.moe_q4_stages >= 2 && k.moe_q4_stages <= 4, "--moe-q4-stages must be 2, 3 or 4, not {}",
           k.moe_q4_stages);
  DG_CHECK(k.moe_q4_consumers == 2 || k.moe_q4_consumers == 4, "--moe-q4-consumers must be 2 or 4, not {}",
           k.moe_q4_consumers);
  DG_CHECK(k.moe_auto_rows > 0, "--moe-auto-rows must be positive, not {}", k.moe_auto_rows);
  DG_CHECK(k.moe_up_col_tiles >= 1 && k.moe_up_col_tiles <= 8 && k.moe_down_col_tiles >= 0 &&
               k.moe_down_col_tiles <= 8,
           "--moe-col-tiles must be from 1 to 8 for the gate/up product and 0 (the format's) to 8 for the down "
           "product, not {},{}", k.moe_up_col_tiles, k.moe_down_col_tiles);
}

}  // namespace dg
