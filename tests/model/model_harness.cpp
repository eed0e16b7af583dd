#include "model/model_harness.h"

namespace dg::test {

Engine::Engine(const std::string& dir, Precision p) : ck(Checkpoint::open(dir)) {
  be = make_cpu_backend(p, static_cast<float>(ck.config.rms_eps));
  model = std::make_unique<Model>(ck.config, ck.weights, *be);
}

KvCache Engine::new_cache() const {
  KvOptions o;
  o.storage = be->precision().kv;
  return KvCache(ck.config, o);
}

ForwardTrace Capture::fn() {
  return [this](const std::string& name, const Tensor& x) {
    const float* p = x.f32();
    t[name] = std::vector<float>(p, p + x.numel());
  };
}

}  // namespace dg::test
