// Tied lm_head and final softcap: logits = cap * tanh((y E^T) / cap), with y E^T rounded to the activation
// storage first (a bf16 model's lm_head output is bf16), then the softcap in f32 (SPEC.md §2.9).
// Reference: DiffusionGemmaForBlockDiffusion.forward.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/tensor.h"

namespace dg {

// y: [rows, hidden]; embed: [vocab, hidden]; out: [rows, vocab] f32. cap <= 0 disables the softcap. An fp8 embed
// (the pack's fp8 rows, --vocab-act fp8): W8A8, y's rows quantised per row to E4M3 (act_quant_fp8_rows) first.
void lm_head_softcap_cpu(const float* y, int64_t rows, const Tensor& embed, float cap, Storage act, float* out);

}  // namespace dg
