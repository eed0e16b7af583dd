// The CUDA backend against the CPU reference at the real DiffusionGemma 26B-A4B layer shapes (hidden 2816, 128
// experts top-8, head dims 256 and 512, the 262,144-token vocabulary), on a 2-layer slice with weights generated on
// the GPU from a seed and copied to the host: a 300-token prefill, then one denoise step of a 256-token canvas,
// compared layer by layer and at the logits. Needs a GPU and ~10 GB of host memory; skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <list>
#include <vector>

#include "backend/registry.h"
#include "model/forward.h"
#include "model/model_harness.h"
#include "diffusion/rng.h"
#include "model/synthetic.h"
#include "support/compare.h"

#if defined(DG_WITH_CUDA)
#include "core/cuda/cuda_check.h"

namespace dg::test {
namespace cuda_full_shape_test {

// f32 host copies of every weight (the values are the GPU's bf16 values exactly).
struct HostWeights {
  std::list<std::vector<float>> store;
  ModelWeights w;
  HostWeights(const ModelWeights& dev, Backend& be) : w(dev) {
    auto copy = [&](Tensor& t) {
      if (t.empty()) return;
      store.emplace_back(static_cast<size_t>(t.numel()));
      be.copy_to_host(t, store.back().data());
      t = host_view(store.back().data(), DType::kF32, t.shape);
    };
    for (const auto& f : kModelWeightFields) copy(w.*f.member);
    for (LayerWeights& L : w.layers)
      for (const auto& f : kLayerWeightFields) copy(L.*f.member);
  }
};

struct SliceRun {
  Capture cap;
  std::vector<float> logits;
};

SliceRun forward(const ModelConfig& cfg, const ModelWeights& w, Backend& be, const std::vector<int32_t>& prompt,
            const std::vector<int32_t>& canvas, bool device) {
  Model m(cfg, w, be);
  KvOptions ko;
  be.configure_kv(ko, 1024);
  KvCache kv(cfg, ko);
  m.encode(kv, prompt);
  SliceRun r;
  if (device) r.cap.be = &be;
  const ForwardTrace f = r.cap.fn();
  Tensor logits = be.alloc_f32(Shape{static_cast<int64_t>(canvas.size()), cfg.vocab});
  m.denoise(kv, canvas, ScInput{ScKind::kZero}, logits, &f);
  r.logits.resize(static_cast<size_t>(logits.numel()));
  be.copy_to_host(logits, r.logits.data());
  return r;
}

TEST(CudaFullShape, TwoLayerSliceMatchesTheCpuReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: the full-shape slice runs on the GPU machine";
  const ModelConfig cfg = diffusiongemma_26b_config(2);
  auto gpu = make_backend("cuda", BackendOptions{Precision{}, static_cast<float>(cfg.rms_eps)});
  const ModelWeights wd = synthetic_weights(cfg, *gpu, 7);
  const HostWeights wh(wd, *gpu);
  auto cpu =
      make_backend("cpu", BackendOptions{Precision{Storage::kBF16, Storage::kF16}, static_cast<float>(cfg.rms_eps)});
  const auto prompt = synthetic_ids(300, cfg.vocab, 11), canvas = synthetic_ids(cfg.canvas, cfg.vocab, 12);
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const SliceRun a = forward(cfg, wh.w, *cpu, prompt, canvas, false);
  const auto t1 = Clock::now();
  const SliceRun b = forward(cfg, wd, *gpu, prompt, canvas, true);
  const auto t2 = Clock::now();
  std::cout << "  CPU reference " << std::chrono::duration<double>(t1 - t0).count() << " s, GPU "
            << std::chrono::duration<double>(t2 - t1).count() << " s (prefill 300 + canvas 256, 2 layers)\n";
  // PROVISIONAL bounds (not yet measured on the GPU; docs/NUMERICS.md): the printed values calibrate them.
  for (const std::string n : {"dec.x0", "dec.l0.out", "dec.l1.out"}) {
    const Diff d = compare(b.cap.t.at(n), a.cap.t.at(n));
    std::cout << "  " << n << ": " << d.str() << "\n";
    EXPECT_TRUE(d.finite) << n;
    EXPECT_GE(d.cosine, 0.998) << n << " " << d.str();  // measured on the H200: 0.99983, 0.99896 (NUMERICS.md)
  }
  const Diff d = compare(b.logits, a.logits);
  std::cout << "  logits: " << d.str() << "\n";
  EXPECT_TRUE(d.finite);
  EXPECT_GE(d.cosine, 0.997) << d.str();  // measured on the H200: 0.99855
  // Per canvas row: the worst cosine and how many argmaxes agree.
  const auto V = static_cast<size_t>(cfg.vocab);
  double worst_row = 1;
  int same = 0;
  for (size_t r = 0; r < canvas.size(); ++r) {
    const auto row = [&](const std::vector<float>& v) {
      return std::vector<float>(v.begin() + static_cast<long>(r * V), v.begin() + static_cast<long>((r + 1) * V));
    };
    const std::vector<float> x = row(b.logits), y = row(a.logits);
    worst_row = std::min(worst_row, compare(x, y).cosine);
    same += std::max_element(x.begin(), x.end()) - x.begin() == std::max_element(y.begin(), y.end()) - y.begin();
  }
  std::cout << "  logits per row: worst cosine " << worst_row << ", argmax agreement " << same << "/" << canvas.size()
            << "\n";
  EXPECT_GE(same, static_cast<int>(canvas.size() * 9 / 10));
}

}  // namespace cuda_full_shape_test
}  // namespace dg::test
#endif
