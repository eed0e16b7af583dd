// The CPU ops on packed weights are dequantise-then-f32: linear and the MoE experts on a packed weight give
// bit-identical outputs to the same ops on the decoded f32 weight, for every format.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "ops/linear/linear.h"
#include "ops/moe/moe.h"
#include "quant/packed_tensor.h"

namespace dg {
namespace dequant_ops_test {

Tensor random_tensor(Shape s, uint32_t seed, float sd) {
  Tensor t = host_tensor(DType::kF32, s);
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, sd);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = n(rng);
  return t;
}

const DType kFormats[] = {DType::kQ4, DType::kQ6, DType::kQ8, DType::kNvFp4, DType::kFp8};

TEST(DequantOps, LinearOnPackedEqualsLinearOnDecoded) {
  const int64_t rows = 5, in = 96, out = 37;
  const Tensor x = random_tensor(Shape{rows, in}, 1, 1.0f);
  const Tensor w = random_tensor(Shape{out, in}, 2, 0.05f);
  for (DType fmt : kFormats) {
    const Tensor q = pack_tensor(w, fmt);
    const Tensor d = unpack_tensor(q);
    std::vector<float> yq(static_cast<size_t>(rows * out)), yd(yq.size()), yw(yq.size());
    linear_cpu(x.f32(), rows, in, q, yq.data());
    linear_cpu(x.f32(), rows, in, d, yd.data());
    linear_cpu(x.f32(), rows, in, w, yw.data());
    EXPECT_EQ(yq, yd) << dtype_name(fmt);
    EXPECT_NE(yq, yw) << dtype_name(fmt) << ": the quantization error should be visible";
  }
}

TEST(DequantOps, ExpertsOnPackedEqualExpertsOnDecoded) {
  const int64_t rows = 6, hidden = 64, ff = 32, n_exp = 4;
  const int top_k = 2;
  const Tensor z = random_tensor(Shape{rows, hidden}, 3, 1.0f);
  const Tensor gate_up = random_tensor(Shape{n_exp, 2 * ff, hidden}, 4, 0.05f);
  const Tensor down = random_tensor(Shape{n_exp, hidden, ff}, 5, 0.05f);
  std::vector<int32_t> idx(static_cast<size_t>(rows * top_k));
  std::vector<float> wt(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) {
    idx[i] = static_cast<int32_t>((i * 3 + i / 2) % n_exp);
    wt[i] = 0.25f + 0.1f * static_cast<float>(i % 3);
  }
  for (DType fmt : kFormats) {
    for (Storage act : {Storage::kF32, Storage::kBF16}) {
      const Tensor gq = pack_tensor(gate_up, fmt), dq = pack_tensor(down, fmt);
      std::vector<float> oq(static_cast<size_t>(rows * hidden)), od(oq.size());
      moe_experts_cpu(z.f32(), rows, idx.data(), wt.data(), top_k, gq, dq, act, oq.data());
      moe_experts_cpu(z.f32(), rows, idx.data(), wt.data(), top_k, unpack_tensor(gq), unpack_tensor(dq), act, od.data());
      EXPECT_EQ(oq, od) << dtype_name(fmt) << " " << storage_name(act);
    }
  }
}

}  // namespace dequant_ops_test
}  // namespace dg
