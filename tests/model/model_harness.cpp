#include "model/model_harness.h"

#include "support/compare.h"

namespace dg::test {

ModelRig::ModelRig(const std::string& dir, Precision p, const std::string& backend, const CudaKernels& kernels,
               const std::string& expert_act)
    : ck(Checkpoint::open(dir)) {
  // fp8 linears take fp8 activations, as the engine's default (--linear-act auto) has them.
  be = make_backend(backend, BackendOptions{p, static_cast<float>(ck.config.rms_eps), 0, kernels, true});
  weights = upload_weights(ck.weights, *be);
  set_expert_act(weights, expert_act);
  model = std::make_unique<Model>(ck.config, weights, *be);
}

KvCache ModelRig::new_cache(int64_t context) const {
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

std::vector<int32_t> pattern_ids(int n, int seed, int64_t vocab) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(static_cast<int32_t>(3 + (i * 37 + seed * 101) % (vocab - 3)));
  return out;
}

std::vector<float> to_host(Backend& be, const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  be.copy_to_host(t, out.data());
  return out;
}

RowsOff decoder_rows_off(ModelRig& e, const std::vector<int32_t>& prompt, const Capture& ref, int64_t rows,
                         double min_cos) {
  const int64_t H = e.ck.config.hidden;
  KvCache kv = e.new_cache(1024);
  e.model->encode(kv, prompt);
  RowsOff r;
  for (int l = 0; l < e.ck.config.n_layers; ++l) {
    const std::vector<float>& in = ref.t.at(l == 0 ? "dec.x0" : "dec.l" + std::to_string(l - 1) + ".out");
    const std::vector<float>& want = ref.t.at("dec.l" + std::to_string(l) + ".out");
    Tensor h = e.be->alloc(Shape{rows, H});
    e.be->copy_from_host(in.data(), h);
    const std::vector<float> got = to_host(*e.be, e.model->decoder_layer(l, h, kv));
    for (int64_t i = 0; i < rows; ++i) {
      const std::span<const float> x(got.data() + i * H, static_cast<size_t>(H));
      const std::span<const float> y(want.data() + i * H, static_cast<size_t>(H));
      ++r.total;
      r.off += compare(x, y).cosine < min_cos;
    }
  }
  return r;
}

}  // namespace dg::test
