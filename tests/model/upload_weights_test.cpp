// upload_weights (src/model/weights.h): every field of the weight table reaches the backend, checked before the
// first copy, and the weights that share an input are placed side by side where the backend fuses their products
// (CUDA: q/k/v, gate/up, the self-conditioning gate/up), which linears() and gated_linear() then run as one product
// (their values against the CPU: tests/ops/conformance). The CUDA half is skipped without a GPU.
#include <gtest/gtest.h>

#include <vector>

#include "backend/registry.h"
#include "model/weights.h"
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

}  // namespace upload_weights_test
}  // namespace dg
