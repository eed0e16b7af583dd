#include "ops/glu/glu.h"

#include <cmath>
#include <vector>

#include "core/tensor.h"
#include "ops/linear/linear.h"

namespace dg {

float gelu_tanh(float x) {
  constexpr float kAlpha = 0.7978845608028654f;  // sqrt(2/pi)
  const float inner = kAlpha * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + std::tanh(inner));
}

void gelu_mul_cpu(const float* gate, const float* up, int64_t n, Storage act, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = round_to(act, round_to(act, gelu_tanh(gate[i])) * up[i]);
}

void gated_mlp_cpu(const float* x, int64_t rows, const Tensor& gate, const Tensor& up, const Tensor& down, Storage act,
                   float* out) {
  const int64_t hidden = gate.shape[1], inter = gate.shape[0];
  std::vector<float> g(static_cast<size_t>(rows * inter)), u(g.size());
  linear_cpu(x, rows, hidden, gate, g.data());
  linear_cpu(x, rows, hidden, up, u.data());
  for (float& v : g) v = round_to(act, v);
  for (float& v : u) v = round_to(act, v);
  gelu_mul_cpu(g.data(), u.data(), rows * inter, act, g.data());
  linear_cpu(g.data(), rows, inter, down, out);
  for (int64_t i = 0; i < rows * hidden; ++i) out[i] = round_to(act, out[i]);
}

}  // namespace dg
