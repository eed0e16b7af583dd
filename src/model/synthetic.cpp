#include "model/synthetic.h"

#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "diffusion/rng.h"

namespace dg {

ModelConfig diffusiongemma_26b_config(int layers) {
  const char* json = R"({
    "model_type": "diffusion_gemma", "canvas_length": 256, "tie_word_embeddings": true,
    "text_config": {
      "vocab_size": 262144, "hidden_size": 2816, "intermediate_size": 2112, "moe_intermediate_size": 704,
      "num_hidden_layers": 30, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
      "global_head_dim": 512, "num_global_key_value_heads": 2, "num_experts": 128, "top_k_experts": 8,
      "sliding_window": 1024, "rms_norm_eps": 1e-6, "final_logit_softcapping": 30.0,
      "hidden_activation": "gelu_pytorch_tanh", "use_bidirectional_attention": "vision",
      "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 1
    }
  })";
  ModelConfig c = parse_model_config(json, "the built-in DiffusionGemma 26B-A4B config");
  if (layers > 0 && layers < c.n_layers) {
    c.layers.resize(static_cast<size_t>(layers));
    c.n_layers = layers;
    c.layers.back() = parse_model_config(json, "").layers[5];  // a full layer last, as the reference forces
  }
  return c;
}

ModelWeights synthetic_weights(const ModelConfig& cfg, Backend& be, uint64_t seed, const std::string& profile) {
  DG_CHECK(profile == "bf16" || profile == "q4" || profile == "fp8" || profile == "nvfp4",
           "unknown synthetic weight profile '{}': expected bf16, q4, fp8 or nvfp4", profile);
  const bool packed = profile != "bf16";
  const DType experts_fmt = profile == "q4" ? DType::kQ4 : profile == "fp8" ? DType::kFp8 : DType::kNvFp4;
  uint64_t next = seed * 1000003ull;
  auto make = [&](Shape s, float scale, float offset) {
    Tensor t = be.alloc(s);
    be.fill_uniform(t, ++next, scale, offset);
    return t;
  };
  const float sqrt3 = std::sqrt(3.0f);  // uniform [-a, a] has std a / sqrt(3)
  auto linear = [&](int64_t out, int64_t in) {
    return make(Shape{out, in}, sqrt3 / std::sqrt(static_cast<float>(in)), 0.0f);
  };
  auto norm = [&](int64_t n) { return make(Shape{n}, 0.3f * sqrt3, 1.0f); };
  const int64_t H = cfg.hidden, I = cfg.intermediate, E = cfg.n_experts, F = cfg.expert_ff;
  ModelWeights w;
  w.embed = make(Shape{cfg.vocab, H}, 0.8f * sqrt3, 0.0f);
  w.final_norm = norm(H);
  w.sc_pre_norm = norm(H);
  auto sc_linear = [&](int64_t out, int64_t in) {
    return packed ? be.synthetic_packed(DType::kQ8, Shape{out, in}, ++next, sqrt3 / std::sqrt(static_cast<float>(in)))
                  : linear(out, in);
  };
  auto experts = [&](Shape s) {
    return packed ? be.synthetic_packed(experts_fmt, s, ++next, 0.15f * sqrt3) : make(s, 0.15f * sqrt3, 0.0f);
  };
  w.sc_gate = sc_linear(I, H);
  w.sc_up = sc_linear(I, H);
  w.sc_down = sc_linear(H, I);
  for (const LayerSpec& s : cfg.layers) {
    LayerWeights L;
    const int64_t D = s.head_dim, nkv = s.n_kv_heads;
    L.q = linear(cfg.n_heads * D, H);
    L.k = linear(nkv * D, H);
    if (s.sliding) L.v = linear(nkv * D, H);
    L.o = linear(H, cfg.n_heads * D);
    L.q_norm = make(Shape{D}, 0.1f * sqrt3, 0.5f);
    L.k_norm = make(Shape{D}, 0.1f * sqrt3, 0.5f);
    L.gate = linear(I, H);
    L.up = linear(I, H);
    L.down = linear(H, I);
    L.router_proj = make(Shape{E, H}, 3.0f * sqrt3, 0.0f);
    L.router_scale = norm(H);
    L.per_expert_scale = make(Shape{E}, 0.5f, 1.0f);
    L.experts_gate_up = experts(Shape{E, 2 * F, H});
    L.experts_down = experts(Shape{E, H, F});
    for (Tensor* n : {&L.input_norm, &L.post_attn_norm, &L.pre_ff_norm, &L.post_ff_norm, &L.post_ff_norm_1,
                      &L.post_ff_norm_2, &L.pre_ff_norm_2})
      *n = norm(H);
    w.layers.push_back(std::move(L));
  }
  w.dtype = DType::kBF16;
  be.synchronize();
  return w;
}

std::vector<int32_t> synthetic_ids(int64_t n, int64_t vocab, uint64_t seed) {
  Lcg rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& t : ids) t = 3 + rng.randint(vocab - 3);
  return ids;
}

BenchModel::BenchModel(const std::string& dir, const std::string& backend, const CudaKernels& kernels, int layers,
                       uint64_t seed, const std::string& profile) {
  if (dir.empty()) {
    cfg = diffusiongemma_26b_config(layers);
    be = make_backend(backend, Precision{}, static_cast<float>(cfg.rms_eps), 0, kernels);
    w = synthetic_weights(cfg, *be, seed, profile);
  } else {
    ck.emplace(Checkpoint::open(dir));
    cfg = ck->config;
    be = make_backend(backend, Precision{}, static_cast<float>(cfg.rms_eps), 0, kernels);
    w = be->upload(ck->weights);
  }
}

}  // namespace dg
