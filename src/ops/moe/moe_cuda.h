// The CUDA launchers of moe.h. Only the .cu files, the CUDA backend and the CUDA tests include this header,
// so a source that includes moe.h for its CPU reference compiles the same with and without DG_WITH_CUDA (and a
// CUDA build takes it from the compiler cache).
#pragma once

#include "ops/moe/moe.h"

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include "core/status.h"

namespace dg {

// How packed expert weights lie in device memory: kDisk as the pack stores them (docs/FORMATS.md); for q4, kKernel,
// rearranged at upload by q4_to_kernel_layout_cuda for fewer instructions per weight (docs/CUDA.md, "q4 in the
// kernel layout"; src/ops/moe/q4_layout.h), or kTiled, the kernel layout's words in stage tiles for the
// warp-specialised kernel only (q4_to_tiled_layout_cuda; docs/EXPERTS.md, "q4 in stage tiles"); for fp8 and bf16,
// kTiled, the rows in stage tiles for both expert kernels (to_row_tiles_cuda; src/ops/moe/row_tiles.h). Other
// formats and layouts: kDisk.
enum class WeightLayout { kDisk, kKernel, kTiled };
// In place: a q4 tensor of shape s on the device, its disk layout in the first packed_layout(kQ4, s).total bytes of
// an allocation of q4_kernel_layout_bytes(s) bytes (16-byte aligned), becomes the kernel layout.
Status q4_to_kernel_layout_cuda(void* W, const Shape& s, cudaStream_t st);
// In place: a q4 tensor in the kernel layout becomes its tiled form (q4_layout.h; q4_tiled_ok(s), else an error).
Status q4_to_tiled_layout_cuda(void* W, const Shape& s, cudaStream_t st);
// In place: an fp8 tensor's codes or a bf16 tensor's rows become their stage tiles (row_tiles.h; row_tiles_ok(dtype,
// s), else an error).
Status to_row_tiles_cuda(void* W, DType dtype, const Shape& s, cudaStream_t st);

// The CUDA MoE pipeline (bf16 activations and weights): router scores (a cuBLAS GEMM between prep and route),
// top-k, a stable counting sort of (row, rank) pairs by expert, a gather, two grouped GEMMs over only the routed
// rows with the gated GELU between them, and a fixed-order f32 combine.

// normed (bf16 [rows, hidden], rmsnorm without weight) becomes bf16(bf16(normed * scale) * root) in place.
Status moe_router_prep_cuda(void* normed, const void* scale, int64_t rows, int64_t hidden, float root, cudaStream_t s);
// r = router_prep(rmsnorm(h) without a weight): the two ops above in one pass where the rows fit a block (hidden a
// multiple of 8 up to 4,096, 16-byte aligned), with the arithmetic of rmsnorm_cuda's block-per-row kernel (rows of
// more than 1,024; up to 1,024 rmsnorm_cuda takes a warp per row, whose sum of squares runs in another order, so a
// hidden size of 264-1,024 may differ from rmsnorm_cuda then moe_router_prep_cuda by a bf16 ulp); else those two.
Status moe_router_input_cuda(const void* h, const void* scale, void* r, int64_t rows, int64_t hidden, float eps,
                             float root, cudaStream_t s);
// scores bf16 [rows, n_exp] -> idx [rows, top_k], weight f32 [rows, top_k] (softmax f32, top-k with ties to the lower
// index, renormalised, times per_expert_scale).
Status moe_route_cuda(const void* scores, int64_t rows, int64_t n_exp, int top_k, const void* per_expert_scale,
                      int32_t* idx, float* weight, cudaStream_t s);
// Groups pair ids p = row * top_k + rank by expert, stably: perm[offsets[e] ..] lists expert e's pairs in p order,
// inv[p] is p's position. counts: scratch [n_exp]; offsets: [n_exp + 1].
// blocks: past 8,192 pairs (up to 256 experts), blocks of 2,048 pairs in three launches instead of one block.
Status moe_group_cuda(const int32_t* idx, int64_t pairs, int64_t n_exp, int32_t* counts, int32_t* offsets,
                      int32_t* perm, int32_t* inv, cudaStream_t s, bool blocks = false);
// moe_route_cuda then moe_group_cuda in one launch, the same outputs bit for bit (counts and offsets too), where
// moe_route_group_takes: up to 1,024 rows, 256 experts, a top-k of 16 and rows x experts of 65,536 (512 rows of 128
// experts). scratch: moe_route_group_scratch int32;
// ticket: one unsigned in device memory, 0 before the first call and left at 0 by each (the launch's last block
// groups; calls sharing a ticket must not run at once).
bool moe_route_group_takes(int64_t rows, int64_t n_exp, int top_k);
int64_t moe_route_group_scratch(int64_t rows, int64_t n_exp, int top_k);
Status moe_route_group_cuda(const void* scores, int64_t rows, int64_t n_exp, int top_k, const void* per_expert_scale,
                            int32_t* idx, float* weight, int32_t* counts, int32_t* offsets, int32_t* perm,
                            int32_t* inv, int32_t* scratch, unsigned* ticket, cudaStream_t s);
// xg[i] = x[perm[i] / top_k] (rows of `hidden` bf16).
Status moe_gather_cuda(const void* x, const int32_t* perm, int64_t pairs, int top_k, int64_t hidden, void* xg,
                       cudaStream_t s);
// y[i, n] = sum_k x[i, k] W[e, n, k] for each expert's rows i in [offsets[e], offsets[e+1]); W: bf16 [n_exp, N, K].
// x must have 16 spare rows after `pairs` (tile reads past the end are discarded).
Status moe_grouped_gemm_cuda(const void* x, int64_t K, const void* W, int64_t N, int64_t n_exp, const int32_t* offsets,
                             void* y, cudaStream_t s);
// The streaming grouped GEMM (moe_stream.cu, design in docs/CUDA.md): y[i, n] = bf16(sum_k x[src(i), k] W[e, n, k])
// for each expert's sorted rows i in [offsets[e], offsets[e+1]), src(i) = x_rows ? x_rows[i] / x_rows_div : i (so
// x_rows = perm, x_rows_div = top_k gathers the routed rows on the fly). W: [n_exp, N, K] in `w_dtype`: bf16, or
// packed q4 / fp8 / nvfp4 / q8 bytes as src/core/packed_layout.h lays them out (dequantised in registers; fp8, q8 row
// scales and nvfp4's expert scale applied to the f32 sums). Reads the offsets on the device only (no host
// synchronisation); each expert's weights are read once per 64 of its rows. Needs K % 8 == 0 (q4, nvfp4: 32;
// fp8, q8: 16) and 16-byte aligned x and W; y: [pairs, N], no spare rows.
// x_scale set (fp8 weights only, sm_89+): x holds E4M3 codes and x_scale[src] the scale of row src
// (moe_act_quant_fp8_cuda); the products run on the e4m3 tensor cores and the sums are multiplied by both scales;
// q4 weights come in the disk or the kernel layout (WeightLayout), the kernel layout made by
// q4_to_kernel_layout_cuda; fp8 and bf16 weights as stored or in stage tiles (kTiled, made by to_row_tiles_cuda).
// stages: the pipeline's depth where a format offers a choice (W8A8: 3 or 4; q4 in the kernel layout: 2, 3 or 4);
// 0: the format's default (3 and 2), measured fastest on the H200 (docs/CUDA.md).
// wide (bf16 weights and activations, or W8A8): passes of 128 rows instead of 64, so an expert's weights are read
// once per 128 of its rows (the batched step's and prefill's sizes; --moe wide); other formats are an error.
// col_tiles: consecutive tiles of output columns (128, or 64 gated) each CTA streams as one pipeline, the next
// tile's first stages copied while the last of the one before are multiplied (a short K's few stages a tile); the
// same bits for any count. W8A8 and bf16 passes of 64 rows take several; the others, and passes of 128 rows (wide),
// take 1; a count below 1 is an error.
Status moe_stream_gemm_cuda(const void* x, const int32_t* x_rows, int x_rows_div, int64_t K, const void* W,
                            DType w_dtype, int64_t N, int64_t n_exp, const int32_t* offsets, void* y, cudaStream_t s,
                            const float* x_scale = nullptr, int stages = 0, WeightLayout q4 = WeightLayout::kDisk,
                            bool wide = false, int col_tiles = 1);
// The same kernel as a dense product: y[rows, N] = bf16(x[rows, K] W[N, K]^T), W one matrix in `w_dtype` (the
// packed linears, e.g. the q8 self-conditioning MLP); blocks of 64 rows (128 with `wide`: bf16, or fp8 weights
// with fp8 activations) are the groups, sharing W. x_scale: x holds E4M3 codes (fp8 weights; as above).
Status stream_linear_cuda(const void* x, int64_t rows, int64_t K, const void* W, DType w_dtype, int64_t N, void* y,
                          cudaStream_t s, WeightLayout q4 = WeightLayout::kDisk, const float* x_scale = nullptr,
                          bool wide = false);
// Whether the streaming kernel has a body for weights in `w_dtype`.
bool moe_stream_supports(DType w_dtype);
// The same product with gate_up [n_exp, 2*ff, K] (gate rows first) and the gated GELU in the epilogue:
// out[i, j] = bf16(bf16(gelu_tanh(g)) * u) with g, u the bf16-rounded products with rows j and ff + j, i.e.
// gelu_mul_split_cuda applied to moe_stream_gemm_cuda's output. out: [pairs, ff].
Status moe_stream_gate_up_cuda(const void* x, const int32_t* x_rows, int x_rows_div, int64_t K, const void* gate_up,
                               DType w_dtype, int64_t ff, int64_t n_exp, const int32_t* offsets, void* out,
                               cudaStream_t s, const float* x_scale = nullptr, int stages = 0,
                               WeightLayout q4 = WeightLayout::kDisk, bool wide = false, int col_tiles = 1);
// The products of moe_stream_gemm_cuda / moe_stream_gate_up_cuda with `wide`, the same bits, by the persistent
// warp-specialised kernel (moe_ws.cu; --moe ws): a producer warpgroup copies the stages, two consumer warpgroups
// multiply them, tiles of 256 weight rows by passes of up to 128 routed rows, neighbouring CTAs on the passes of one
// weight slice. W8A8 (fp8 weights, x E4M3 codes with x_scale; K % 16 == 0), bf16 (x bf16, x_scale null;
// K % 8 == 0), or q4 in the kernel layout (WeightLayout::kKernel, as the CUDA backend uploads it; x bf16, x_scale null;
// K % 32 == 0; passes of up to 64 rows, moe_ws_q4.cu: the streaming kernel's bits); offsets required; x_rows_max:
// the rows of x (their bytes under 2^31); at most 1,024 experts; compute capability 9.0 (sm_90a code); form: how
// the weights lie and the q4 kernel runs (MoeWsForm).
// How moe_ws_* reads its weights, the same bits every way: consumers, the q4 kernel's consumer warpgroups, 2 (two
// m64 tiles each) or 4 (one each; --moe-q4-consumers); layout, q4 weights in the kernel layout or its tiled form
// (q4_to_tiled_layout_cuda), fp8 and bf16 weights in stage tiles with kTiled (to_row_tiles_cuda), else as
// stored.
struct MoeWsForm {
  int consumers = 2;
  WeightLayout layout = WeightLayout::kKernel;
};
// Whether moe_ws_* would run a product of K-element rows over n_exp experts of w_rows weight rows with x_rows_max
// activation rows (W8A8 with act8, bf16 otherwise) on this device, rather than refuse it (--moe auto asks).
bool moe_ws_takes(bool act8, int64_t K, int64_t n_exp, int64_t w_rows, int64_t x_rows_max);
// The same question for q4 weights in the kernel layout.
bool moe_ws_q4_takes(int64_t K, int64_t n_exp, int64_t w_rows, int64_t x_rows_max);
Status moe_ws_gemm_cuda(const void* x, const float* x_scale, const int32_t* x_rows, int x_rows_div,
                        int64_t x_rows_max, int64_t K, const void* W, DType w_dtype, int64_t N, int64_t n_exp,
                        const int32_t* offsets, void* y, cudaStream_t s, const MoeWsForm& form = {});
Status moe_ws_gate_up_cuda(const void* x, const float* x_scale, const int32_t* x_rows, int x_rows_div,
                           int64_t x_rows_max, int64_t K, const void* gate_up, DType w_dtype, int64_t ff,
                           int64_t n_exp, const int32_t* offsets, void* out, cudaStream_t s,
                           const MoeWsForm& form = {});
// Per-row FP8 activations for the W8A8 products: scale[r] = amax(|x[r]|) / 448 and q[r, k] = e4m3(x[r, k] / scale)
// (round to nearest even, saturating; an all-zero row has scale 0 and codes 0), as encode_rows does for fp8
// weights. x: bf16 [rows, K]; q: [rows, K] bytes; scale: [rows] f32.
Status moe_act_quant_fp8_cuda(const void* x, int64_t rows, int64_t K, void* q, float* scale, cudaStream_t s);
// The W8A8 MoE's inputs: moe_router_input_cuda(h, scale, r) and moe_act_quant_fp8_cuda(z, zq, zs), both [rows,
// hidden], in one launch where both take their 16-byte paths (hidden % 8 == 0 up to 4,096, aligned); the same bits.
Status moe_inputs_fp8_cuda(const void* h, const void* scale, void* r, int64_t rows, int64_t hidden, float eps,
                           float root, const void* z, void* zq, float* zs, cudaStream_t s);
// out[r, c] = bf16(sum_k weight[r, k] * y[inv[r * top_k + k], c]), summed in rank order.
Status moe_combine_cuda(const void* y, const int32_t* inv, const float* weight, int64_t rows, int top_k, int64_t hidden,
                        void* out, cudaStream_t s);

}  // namespace dg
#endif
