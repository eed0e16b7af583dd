// dg_dump_logits: the engine's logits for one fixed input, for comparison with transformers in another process
// (scripts/full_shape_vs_hf.py). Opens, through the engine, the full DiffusionGemma 26B-A4B shape with synthetic
// weights generated on the backend from a seed (src/model/synthetic.cpp), or a checkpoint; prefills a prompt of ids
// from our LCG, then runs two denoise steps on a fixed canvas as the reference profile's generate does: step 1 with
// zero self-conditioning, step 2 self-conditioned on step 1's logits over T. Writes <out>.json (config, seed, ids, T)
// and the raw little-endian f32 logits [canvas, vocab] of each step to <out>.step1.f32 and <out>.step2.f32.
//
// Usage: dg_dump_logits --out /tmp/engine [--layers 30] [--seed 1] [--prompt 1024] [--backend cuda]
//                       [--model DIR] [--attention flash] [--moe stream] [--temperature 0.8]
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "diffusion/rng.h"
#include "engine/engine_core.h"
#include "model/forward.h"
#include "model/synthetic.h"

namespace dg {
namespace {

struct Options {
  std::string out, model, backend = "cuda";
  int layers = 30, prompt = 1024;
  uint64_t seed = 1;
  float temperature = 0.8f;
  CudaKernels kernels;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "dg_dump_logits: " << why
            << "\nusage: dg_dump_logits --out PREFIX [--layers N] [--seed S] [--prompt N] [--backend cuda|cpu]"
               " [--model DIR] [--attention K] [--moe K] [--temperature T]\n";
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage("option '" + a + "' needs a value");
    const std::string v = argv[++i];
    if (a == "--out") o.out = v;
    else if (a == "--model") o.model = v;
    else if (a == "--backend") o.backend = v;
    else if (a == "--layers") o.layers = std::stoi(v);
    else if (a == "--prompt") o.prompt = std::stoi(v);
    else if (a == "--seed") o.seed = std::stoull(v);
    else if (a == "--temperature") o.temperature = std::stof(v);
    else if (a == "--attention") o.kernels.attention = kernel_from_name(kAttentionKernelNames, v, "attention kernel");
    else if (a == "--moe") o.kernels.moe = kernel_from_name(kMoeKernelNames, v, "MoE kernel");
    else usage("unknown option '" + a + "'");
  }
  if (o.out.empty()) usage("--out is required");
  if (o.prompt < 1) usage("--prompt must be at least 1");
  return o;
}

void write_f32(const std::string& path, const std::vector<float>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  DG_CHECK(f.good(), "cannot write '{}'", path);
}

int run(const Options& o) {
  EngineOptions eo;
  eo.model_dir = o.model.empty() ? "synthetic:26b-a4b" : o.model;
  eo.backend = o.backend;
  eo.expert_act = "bf16";  // the experts' activations as the reference computes them, whatever the weights' format
  const std::unique_ptr<EngineCore> engine = EngineCore::open(eo, EngineTuning{o.kernels, o.layers, o.seed});
  const ModelConfig& cfg = engine->config();
  Backend* const be = &engine->backend();
  const Model& model = engine->model();
  const int64_t C = cfg.canvas, V = cfg.vocab;
  const auto prompt = synthetic_ids(o.prompt, V, o.seed + 101), canvas = synthetic_ids(C, V, o.seed + 202);
  KvCache kv = engine->new_cache(o.prompt + C);
  model.encode(kv, prompt);
  Tensor logits = be->alloc_f32(Shape{C, V}), tempered = be->alloc(Shape{C, V});
  std::vector<float> host(static_cast<size_t>(C * V));
  std::vector<RowStats> stats(static_cast<size_t>(C));
  model.denoise(kv, canvas, ScInput{ScKind::kZero}, logits);
  be->copy_to_host(logits, host.data());
  write_f32(o.out + ".step1.f32", host);
  be->row_stats(logits, o.temperature, tempered, stats.data());
  model.denoise(kv, canvas, ScInput{ScKind::kLogits, &tempered, 0.0f}, logits);
  be->copy_to_host(logits, host.data());
  write_f32(o.out + ".step2.f32", host);
  std::vector<bool> sliding;
  for (const LayerSpec& l : cfg.layers) sliding.push_back(l.sliding);
  nlohmann::json j = {{"layers", cfg.n_layers}, {"sliding", sliding}, {"prompt_tokens", o.prompt},
                      {"seed", o.seed}, {"canvas", C}, {"vocab", V},
                      {"temperature", o.temperature}, {"backend", be->name()}, {"device", be->device_name()},
                      {"attention_kernel", kernel_name(o.kernels.attention)}, {"moe_kernel", kernel_name(o.kernels.moe)},
                      {"model", o.model.empty() ? "synthetic-26b-a4b" : o.model}, {"prompt_ids", prompt},
                      {"canvas_ids", canvas}};
  std::ofstream(o.out + ".json") << j.dump() << "\n";
  std::cout << "dg_dump_logits: wrote " << o.out << ".{json,step1.f32,step2.f32} (" << cfg.n_layers << " layers, "
            << o.prompt << "-token prompt, canvas " << C << ")\n";
  return 0;
}

}  // namespace
}  // namespace dg

int main(int argc, char** argv) {
  try {
    return dg::run(dg::parse(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "dg_dump_logits: " << e.what() << "\n";
    return 1;
  }
}
