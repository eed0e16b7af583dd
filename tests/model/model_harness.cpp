#include "model/model_harness.h"

namespace dg::test {

Engine::Engine(const std::string& dir, Precision p, const std::string& backend, const CudaKernels& kernels)
    : ck(Checkpoint::open(dir)) {
  be = make_backend(backend, p, static_cast<float>(ck.config.rms_eps), 0, kernels);
  weights = be->upload(ck.weights);
  model = std::make_unique<Model>(ck.config, weights, *be);
}

KvCache Engine::new_cache(int64_t context) const {
  KvOptions o;
  be->configure_kv(o, context);
  return KvCache(ck.config, o);
}

ForwardTrace Capture::fn() {
  return [this](const std::string& name, const Tensor& x) {
    std::vector<float> v(static_cast<size_t>(x.numel()));
    if (be != nullptr) {
      be->copy_to_host(x, v.data());
    } else {
      std::copy(x.f32(), x.f32() + x.numel(), v.begin());
    }
    t[name] = std::move(v);
  };
}

}  // namespace dg::test
