// Mixture of experts: the router picks top_k of n_experts per row, and the experts' gated-GELU MLPs are mixed
// with the routing weights.
// Router (input: the raw residual h): r = rmsnorm_noscale(h) * scale * hidden^-1/2; p = softmax_f32(proj(r));
//   top_k by probability (ties: lower expert index first), renormalised to sum 1, times per_expert_scale.
// Experts (input: z = pre_feedforward_layernorm_2(h)): g|u = gate_up[e] z (gate rows first), y_e = down[e] (gelu(g) u)
//   in the activation storage; out = sum_k w_k y_{e_k} accumulated in f32 in rank order, rounded once.
// Reference: DiffusionGemmaTextRouter, DiffusionGemmaTextExperts (grouped_mm mixing semantics).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/tensor.h"

namespace dg {

// h: [rows, hidden] f32. Outputs idx, weight: [rows, top_k], sorted by descending probability.
void moe_route_cpu(const float* h, int64_t rows, const Tensor& scale, const Tensor& proj, const Tensor& per_expert_scale,
                   int top_k, float eps, Storage act, int32_t* idx, float* weight);

// z: [rows, hidden]; gate_up: [E, 2*ff, hidden]; down: [E, hidden, ff]; out: [rows, hidden].
void moe_experts_cpu(const float* z, int64_t rows, const int32_t* idx, const float* weight, int top_k,
                     const Tensor& gate_up, const Tensor& down, Storage act, float* out);

}  // namespace dg
