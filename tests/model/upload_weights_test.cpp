// upload_weights (src/model/weights.h): every field of the weight table reaches the backend, checked before the
// first copy, and the weights that share an input are placed side by side where the backend fuses their products
// (CUDA: q/k/v, gate/up, the self-conditioning gate/up), which linears() and gated_linear() then run as one product
// (their values against the CPU: tests/ops/conformance). The CUDA half is skipped without a GPU.
#include <gtest/gtest.h>

#include <vector>

#include "backend/registry.h"
#include "model/weights.h"
#include "quant/packed_tensor.h"
#include "support/seeded.h"

namespace dg {
namespace upload_weights_test {

struct HostModel {
  std::vector<std::vector<float>> store;
  ModelWeights w;
  Tensor make(Shape s) {
    store.push_back(test::seeded_uniform(static_cast<size_t>(s.numel()), store.size() + 1, -0.2f, 0.2f,
                                         Storage::kBF16));
    return host_view(store.back().data(), DType::kF32, s);
  }
  HostModel() {
    const int64_t H = 64, I = 96;
    store.reserve(40);
    for (const auto& f : kModelWeightFields) w.*f.member = make(f.use == WeightUse::kLinear ? Shape{I, H} : Shape{H});
    w.layers.resize(1);
    for (const auto& f : kLayerWeightFields)
      w.layers[0].*f.member = make(f.use == WeightUse::kPlain ? Shape{H} : Shape{I, H});
  }
};

const char* at(const Tensor& t, int64_t bytes) { return static_cast<const char*>(t.data) + bytes; }

TEST(UploadWeights, CpuKeepsEveryView) {
  HostModel h;
  auto cpu = make_backend("cpu");
  const ModelWeights d = upload_weights(h.w, *cpu);
  for (const auto& f : kModelWeightFields) EXPECT_EQ((d.*f.member).data, (h.w.*f.member).data) << f.what;
  for (const auto& f : kLayerWeightFields)
    EXPECT_EQ((d.layers[0].*f.member).data, (h.w.layers[0].*f.member).data) << f.what;
}

TEST(UploadWeights, CudaPlacesWeightsThatShareAnInputSideBySide) {
  if (!backend_entry("cuda").present()) GTEST_SKIP() << "no CUDA device (or a build without CUDA)";
  HostModel h;
  auto gpu = make_backend("cuda");
  const ModelWeights d = upload_weights(h.w, *gpu);
  const LayerWeights& L = d.layers[0];
  for (const auto& f : kLayerWeightFields) EXPECT_EQ((L.*f.member).device, Device::kCuda) << f.what;
  EXPECT_EQ(L.k.data, at(L.q, L.q.nbytes())) << "q, k, v not side by side";
  EXPECT_EQ(L.v.data, at(L.k, L.k.nbytes()));
  EXPECT_EQ(L.up.data, at(L.gate, L.gate.nbytes())) << "gate, up not side by side";
  EXPECT_EQ(d.sc_up.data, at(d.sc_gate, d.sc_gate.nbytes())) << "sc_gate, sc_up not side by side";
}

// fp8 weights that share an input: each placed a multiple of 16 code rows past the one before (fp8_group_stride), so
// one e4m3 product over the first's codes reaches every one (docs/CUDA.md), each weight still whole where it moved
// (its product with an input the same bits before and after).
TEST(UploadWeights, CudaPlacesFp8WeightsSixteenCodeRowsApart) {
  if (!backend_entry("cuda").present()) GTEST_SKIP() << "no CUDA device (or a build without CUDA)";
  auto gpu = make_backend("cuda");
  const int64_t K = 96, R = 5, rows[3] = {64, 32, 48};
  const std::vector<float> xv = test::seeded_uniform(static_cast<size_t>(R * K), 39, -1.0f, 1.0f, Storage::kBF16);
  Tensor x = gpu->alloc(Shape{R, K});
  gpu->copy_from_host(xv.data(), x);
  Tensor dev[3];
  std::vector<float> before[3];
  auto product = [&](const Tensor& w) {
    Tensor y = gpu->alloc(Shape{R, w.shape[0]});
    gpu->linear(x, w, y);
    std::vector<float> out(static_cast<size_t>(y.numel()));
    gpu->copy_to_host(y, out.data());
    return out;
  };
  for (int i = 0; i < 3; ++i) {
    const std::vector<float> v = test::seeded_uniform(static_cast<size_t>(rows[i] * K), 40 + static_cast<uint64_t>(i),
                                                      -0.3f, 0.3f, Storage::kBF16);
    dev[i] = gpu->upload(pack_tensor(host_view(v.data(), DType::kF32, Shape{rows[i], K}), DType::kFp8));
    before[i] = product(dev[i]);
  }
  Tensor* group[] = {&dev[0], &dev[1], &dev[2]};
  gpu->place_side_by_side(group);
  for (int i = 0; i < 3; ++i) {
    if (i > 0) {
      const int64_t stride = (static_cast<int64_t>(dev[i - 1].nbytes()) + 16 * K - 1) / (16 * K) * (16 * K);
      EXPECT_EQ(dev[i].data, at(dev[i - 1], stride)) << "weight " << i << " not 16 code rows past the one before";
    }
    EXPECT_EQ(product(dev[i]), before[i]) << "weight " << i << " changed where it moved";
  }
}

}  // namespace upload_weights_test
}  // namespace dg
