// Self-conditioning soft embedding: soft[r] = (P[r] E) * scale with P = softmax_f32(sc_logits[r]) rounded to the
// activation storage, the product rounded, then scaled by the embedding scale (SPEC.md §3).
// Sparse variant (the seed's survivor path, approximate): only tokens with p >= cutoff * p_max contribute, and the
// dropped tail is not renormalised; cutoff = e^-10 in the seed.
// Reference: DiffusionGemmaDecoderModel.forward (soft_embeddings).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/tensor.h"

namespace dg {

// The most survivors a row may keep on the CUDA survivor path (soft_survivors_cuda; CudaKernels::sc_survivors).
inline constexpr int kSurvivorCapMax = 2048;

// sc_logits: [rows, vocab] of `sc_dtype` (f32, bf16 or f16; already processed logits); embed: [vocab, hidden], or
// fp8 [hidden, vocab] (--vocab-act fp8: the transpose as fp8 rows; each row of P quantised per row to E4M3 before
// the product); out: [rows, hidden] f32. sparse_cutoff == 0 selects the exact path.
void soft_embed_cpu(const void* sc_logits, DType sc_dtype, int64_t rows, const Tensor& embed, float scale,
                    Storage act, float sparse_cutoff, float* out);

}  // namespace dg
