// The CUDA launchers of glu.h. Only the .cu files, the CUDA backend and the CUDA tests include this header,
// so a source that includes glu.h for its CPU reference compiles the same with and without DG_WITH_CUDA (and a
// CUDA build takes it from the compiler cache).
#pragma once

#include "ops/glu/glu.h"

#if defined(DG_WITH_CUDA)
#include <cuda_runtime.h>

#include "core/status.h"

namespace dg {

// bf16: out[i] = bf16(bf16(gelu_tanh(gate[i])) * up[i]) over n elements (out may alias gate).
Status gelu_mul_cuda(const void* gate, const void* up, void* out, int64_t n, cudaStream_t s);
// Fused expert activation on a [rows, 2*ff] gate|up buffer: out [rows, ff] = bf16(bf16(gelu(g)) * u).
Status gelu_mul_split_cuda(const void* gate_up, int64_t rows, int64_t ff, void* out, cudaStream_t s);
// The same over the raw sums of two W8A8 products (bf16 rows of ld elements: gate in columns [0, ff), up in
// [up_col, up_col + ff)): g = (gate_up[r][f] · x_scale[r]) · gate_scale[f] and u = (gate_up[r][up_col + f] ·
// x_scale[r]) · up_scale[f] in f32, then bf16(bf16(gelu(g)) * u). The twin is the CPU's W8A8 linears (each output
// rounded to bf16 once) and gelu_mul: the one rounding of each product comes before its scales here, after them there.
Status gelu_mul_split_scaled_cuda(const void* gate_up, int64_t rows, int64_t ff, int64_t ld, int64_t up_col,
                                  const float* x_scale, const float* gate_scale, const float* up_scale, void* out,
                                  cudaStream_t s);
// gelu_mul_split_scaled_cuda, and out's E4M3 codes [rows, ff] and row scales as moe_act_quant_fp8_cuda writes them from
// the stored rows (the next W8A8 product's input): the same bytes, one launch. Needs
// gelu_mul_split_scaled_codes_fits (ff a multiple of 8 up to 4,096, ld and up_col multiples of 8, 16-byte aligned
// gate_up and out, 8-byte aligned codes); an error otherwise.
bool gelu_mul_split_scaled_codes_fits(const void* gate_up, int64_t ff, int64_t ld, int64_t up_col, const void* out,
                                      const void* codes);
Status gelu_mul_split_scaled_codes_cuda(const void* gate_up, int64_t rows, int64_t ff, int64_t ld, int64_t up_col,
                                        const float* x_scale, const float* gate_scale, const float* up_scale,
                                        void* out, void* codes, float* scale, cudaStream_t s);

}  // namespace dg
#endif
