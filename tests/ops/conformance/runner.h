// The conformance harness's runners (tests/ops/conformance_test.cpp): for each Backend op, how a case's inputs are
// made and the op is called. A runner runs one side of a comparison: the backend under test, or the CPU twin, where a
// fused op runs as the composition of the unfused ones. Inputs are seeded by the case (support/seeded.h) and rounded
// to the tested backend's activation storage, so both sides read the same numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "ops/moe/moe.h"
#include "ops/op_cases.h"

namespace dg::test {

struct Side {
  Backend& be;
  bool twin = false;             // the CPU twin: fused ops as their composition
  Storage act = Storage::kBF16;  // inputs are rounded to this storage before either side reads them
};

struct Output {
  std::string name;
  std::vector<float> values;    // compared under the case's bound
  std::vector<int64_t> ints;    // compared exactly (ids, decisions, bit patterns)
  std::vector<float> abs_sum;   // the twin's: per element, the sum of |products| behind it (products only)
};

using OpRunner = std::vector<Output> (*)(const OpCase& c, const Side& s);

// The runner of a Backend op, or null; the ops that have one.
OpRunner op_runner(const std::string& op);
std::vector<std::string> runner_ops();

// Helpers of the runners.
// n seeded values of input `input` of case c, uniform in [lo, hi], rounded through `round`.
std::vector<float> case_values(const OpCase& c, uint64_t input, int64_t n, float lo, float hi, Storage round);
uint64_t case_seed(const OpCase& c, uint64_t input);
// An activation of the side's backend holding `v` (alloc, copy_from_host); f32: an f32 buffer (logits).
Tensor activation(const Side& s, Shape shape, const std::vector<float>& v, bool f32 = false);
std::vector<float> to_host(const Side& s, const Tensor& t);
// A weight of the case's values (bf16-representable, uniform in [lo, hi]) in format `fmt`, checked and uploaded to
// the side's backend (dg::Error where it refuses); `host` receives the host tensor (packed formats: the planes).
Tensor weight(const Side& s, const OpCase& c, uint64_t input, Shape shape, float lo, float hi, DType fmt, WeightUse use,
              Tensor* host = nullptr);
// The case's layer scalar: "scalar" for every row, or with "split" and "scalar2" one for the rows before the split
// and another after (a forward of encoder and decoder rows); scale_rows applies it as the twin's last step.
RowScalar case_scalar(const OpCase& c);
void scale_rows(const Side& s, Tensor& t, const RowScalar& r);
// A bf16 norm weight [dim] of the case's values, uniform in [lo, hi].
Tensor norm_weight(const Side& s, const OpCase& c, uint64_t input, int64_t dim, float lo, float hi);
// S[r, o] = sum_i |x[r, i] w[o, i]| of a host weight (any format: decoded).
std::vector<float> abs_products(const std::vector<float>& x, int64_t rows, int64_t in, const Tensor& w);
// Frequencies theta^(-2i / dim) for i < rotated, 0 above; one vector per (dim, rotated) for the life of the process
// (a backend may key device copies by the vector's address, as it does the model's).
const std::vector<float>& rope_freqs(int64_t dim, int64_t rotated);

// The inputs of a MoE case (rows, hidden, ff, experts, top_k, act_fp8) with experts in format `experts`: the router's
// residual h with wide margins at each row's top_k boundary, the experts' input z, and the weights.
struct MoeInputs {
  Tensor h, z, proj, scale, per_expert, gate_up, down;
  DType act = DType::kBF16;
  MoeWeights weights() const { return {proj, scale, per_expert, gate_up, down, act}; }
};
MoeInputs moe_inputs(const OpCase& c, const Side& s, DType experts);

// The runners, by group (runners_*.cpp).
std::vector<Output> run_rmsnorm(const OpCase& c, const Side& s);
std::vector<Output> run_rmsnorm_rope(const OpCase& c, const Side& s);
std::vector<Output> run_rope(const OpCase& c, const Side& s);
std::vector<Output> run_rope_spans(const OpCase& c, const Side& s);
std::vector<Output> run_qkv_heads(const OpCase& c, const Side& s);
std::vector<Output> run_gelu_mul(const OpCase& c, const Side& s);
std::vector<Output> run_add(const OpCase& c, const Side& s);
std::vector<Output> run_scale(const OpCase& c, const Side& s);
std::vector<Output> run_fill_uniform(const OpCase& c, const Side& s);
std::vector<Output> run_residual_norms(const OpCase& c, const Side& s);
std::vector<Output> run_ffn_tail(const OpCase& c, const Side& s);
std::vector<Output> run_embed(const OpCase& c, const Side& s);
std::vector<Output> run_linear(const OpCase& c, const Side& s);
std::vector<Output> run_linears(const OpCase& c, const Side& s);
std::vector<Output> run_gated_linear(const OpCase& c, const Side& s);
std::vector<Output> run_lm_head(const OpCase& c, const Side& s);
std::vector<Output> run_soft_embed(const OpCase& c, const Side& s);
std::vector<Output> run_moe(const OpCase& c, const Side& s);
std::vector<Output> run_linear_residual_norms(const OpCase& c, const Side& s);
std::vector<Output> run_linear_moe_ffn_tail(const OpCase& c, const Side& s);
std::vector<Output> run_attention(const OpCase& c, const Side& s);
std::vector<Output> run_attention_topk(const OpCase& c, const Side& s);
std::vector<Output> run_row_stats(const OpCase& c, const Side& s);
std::vector<Output> run_categorical(const OpCase& c, const Side& s);
std::vector<Output> run_decide(const OpCase& c, const Side& s);

}  // namespace dg::test
