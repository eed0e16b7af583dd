// dg::EngineCore: the engine as the rest of this project uses it (the CLI, the server, the smoketest, the tests).
// It opens a model directory (config, generation config, safetensors or a .dgq pack, tokenizer) or a synthetic
// model, owns the backend and the model, and hands out KV caches, sessions and one-shot generations. The public
// dg::Engine (include/dg/engine.h) wraps it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "backend/backend.h"
#include "backend/registry.h"
#include "diffusion/generate.h"
#include "diffusion/options.h"
#include "dg/engine.h"
#include "engine/session.h"
#include "io/tokenizer.h"
#include "model/checkpoint.h"
#include "model/forward.h"

namespace dg {

// What the public EngineOptions leave out: the CUDA backend's kernel choices and the synthetic model's shape and
// seed (the benchmarks' A/B switches).
struct EngineTuning {
  CudaKernels cuda;
  int synthetic_layers = 0;     // a synthetic model keeps the first N layers of the 26B-A4B shape (0: all)
  uint64_t synthetic_seed = 1;  // ... and draws its weights from this seed
  int64_t synthetic_peaked = 0;  // ... with this many tokens peaked (synthetic_weights)
};

// The options' precision names (precision, kv_precision) parsed; throws dg::Error naming a bad one.
Precision engine_precision(const EngineOptions& opt);

class EngineCore {
 public:
  static std::unique_ptr<EngineCore> open(const EngineOptions& opt, const EngineTuning& tuning = {});

  const ModelConfig& config() const { return ck_.config; }
  const GenerationConfig& generation() const { return ck_.generation; }
  const Checkpoint& checkpoint() const { return ck_; }
  const EngineOptions& options() const { return opt_; }
  const Precision& precision() const { return precision_; }  // options().precision and kv_precision, parsed
  bool has_tokenizer() const { return tok_.has_value(); }
  const Tokenizer& tokenizer() const;  // throws dg::Error naming the missing tokenizer.json
  Backend& backend() const { return *be_; }
  const Model& model() const { return *model_; }

  // Sampler options from the checkpoint's generation config and the chosen profile.
  SamplerOptions default_sampler(SamplerProfile profile) const;
  // A KV cache for options().context tokens (a device cache is allocated up front and does not grow; the host's
  // grows), or for `context` tokens.
  KvCache new_cache() const { return new_cache(opt_.context); }
  KvCache new_cache(int64_t context) const;

  // A session owning its own KV cache, for conversations that grow turn by turn (prefix reuse, rewind).
  Session open_session(const SessionOptions& opt = {}) const;

  // One generation from an empty cache, sized to what it can use (the prompt, the answer budget and the last canvas)
  // when that is more than options().context.
  GenerateResult generate(std::span<const int32_t> prompt, const SamplerOptions& opt,
                          const GenerateEvents* events = nullptr) const;

 private:
  EngineCore(Checkpoint ck, const EngineOptions& opt, const EngineTuning& tuning, Precision precision, AttnTopk topk);
  Checkpoint ck_;
  EngineOptions opt_;
  Precision precision_;
  std::optional<Tokenizer> tok_;
  std::unique_ptr<Backend> be_;
  ModelWeights weights_;  // as the backend reads them (destroyed before the backend)
  std::unique_ptr<Model> model_;
};

}  // namespace dg
