// Gated GELU: out = gelu_tanh(gate) * up, with gelu_pytorch_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// The activation and the product are each rounded to the activation storage (as the reference's bf16 ops are).
// Reference: DiffusionGemmaText4MLP / DiffusionGemmaSelfConditioning / DiffusionGemmaTextExperts act_fn(gate) * up.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/tensor.h"

namespace dg {

float gelu_tanh(float x);

// gate, up, out: n contiguous f32 values (out may alias gate or up).
void gelu_mul_cpu(const float* gate, const float* up, int64_t n, Storage act, float* out);

// A dense gated MLP, down(gelu(gate(x)) * up(x)); x: [rows, hidden] -> out: [rows, hidden]. Intermediate
// products are rounded to `act`.

void gated_mlp_cpu(const float* x, int64_t rows, const Tensor& gate, const Tensor& up, const Tensor& down, Storage act,
                   float* out);

}  // namespace dg
