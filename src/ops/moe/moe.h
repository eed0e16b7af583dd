// Mixture of experts: the router picks top_k of n_experts per row, and the experts' gated-GELU MLPs are mixed
// with the routing weights.
// Router (input: the raw residual h): r = rmsnorm_noscale(h) * scale * hidden^-1/2; p = softmax_f32(proj(r));
//   top_k by probability (ties: lower expert index first), renormalised to sum 1, times per_expert_scale.
// Experts (input: z = pre_feedforward_layernorm_2(h)): g|u = gate_up[e] z (gate rows first), y_e = down[e] (gelu(g) u)
//   in the activation storage; out = sum_k w_k y_{e_k} accumulated in f32 in rank order, rounded once. fp8 experts
//   may take fp8 activations (W8A8, MoeWeights::act): both expert inputs quantised per row to E4M3.
// Reference: DiffusionGemmaTextRouter, DiffusionGemmaTextExperts (grouped_mm mixing semantics).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "core/tensor.h"

namespace dg {

// The router's hidden^-1/2: a Python float in the reference, multiplied in f32 and rounded with the product, never
// rounded itself.
inline float router_root(int64_t hidden) { return static_cast<float>(std::pow(static_cast<double>(hidden), -0.5)); }

// What the MoE op reads: the router's and the experts' weights, and the experts' activation operand.
struct MoeWeights {
  const Tensor& router_proj;       // [n_experts, hidden]
  const Tensor& router_scale;      // [hidden]
  const Tensor& per_expert_scale;  // [n_experts]
  const Tensor& gate_up;           // [n_experts, 2 * expert_ff, hidden]: rows [0, ff) gate, [ff, 2 ff) up
  const Tensor& down;              // [n_experts, hidden, expert_ff]
  DType act = DType::kBF16;        // bf16, or kFp8: per-row E4M3 activations for fp8 experts (W8A8)
};

// h: [rows, hidden] f32. Outputs idx, weight: [rows, top_k], sorted by descending probability.
void moe_route_cpu(const float* h, int64_t rows, const Tensor& scale, const Tensor& proj, const Tensor& per_expert_scale,
                   int top_k, float eps, Storage act, int32_t* idx, float* weight);

// z: [rows, hidden]; gate_up: [E, 2*ff, hidden]; down: [E, hidden, ff]; out: [rows, hidden].
// act_fp8 (the W8A8 arithmetic of fp8 experts): each expert input row (z, then the gated activation) is replaced by
// its per-row FP8 E4M3 quantisation (act_quant_fp8_rows) before the product.
void moe_experts_cpu(const float* z, int64_t rows, const int32_t* idx, const float* weight, int top_k,
                     const Tensor& gate_up, const Tensor& down, Storage act, float* out, bool act_fp8 = false);
// Rows of x [rows, K] replaced in place by their FP8 quantisation: scale = amax / 448, code = e4m3(x / scale)
// (encode_rows), value = e4m3(code) * scale.
void act_quant_fp8_rows(float* x, int64_t rows, int64_t K);

}  // namespace dg
