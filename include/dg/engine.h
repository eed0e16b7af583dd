// dg::Engine: the public entry point the CLI (and later the server) use. It opens a model directory (config,
// generation config, safetensors, tokenizer), owns the backend and the model, and runs generations.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "backend/backend.h"
#include "diffusion/generate.h"
#include "diffusion/options.h"
#include "engine/session.h"
#include "io/tokenizer.h"
#include "model/checkpoint.h"
#include "model/forward.h"

namespace dg {

struct EngineOptions {
  std::string model_dir;
  std::string backend = "cpu";  // "cpu" | "cuda"
  int device = 0;               // CUDA device index
  Precision precision;          // the CPU reference's storage roundings (the CUDA backend is bf16 / f16 KV)
  int threads = 0;              // 0: the CPUs this process may use (core/cpus.h)
  int64_t context = 8192;       // tokens a KV cache holds (prompt + answer); device caches are sized to it
                                // (a one-shot generate() sizes its own cache to the prompt and answer)
  int64_t kv_ring_slack = 512;
  int64_t prefill_chunk = 4096;  // prompts longer than this are encoded in chunks (bounded activation memory)
  bool check_tensors = false;    // check that every weight is finite before use (model/integrity.h)
  bool verify = false;           // check a .dgq pack's per-tensor checksums before use (model/integrity.h)
  bool graphs = true;            // CUDA: denoise steps replay captured graphs (Model::set_graphs)
  std::string expert_act = "auto";  // the experts' activation operand (set_expert_act): auto | bf16 | fp8
  AttnTopk attention_topk;          // full layers' top-k sparse attention (Model::set_attention_topk); off: dense
};

class Engine {
 public:
  static std::unique_ptr<Engine> open(const EngineOptions& opt);

  const ModelConfig& config() const { return ck_.config; }
  const GenerationConfig& generation() const { return ck_.generation; }
  const Checkpoint& checkpoint() const { return ck_; }
  const EngineOptions& options() const { return opt_; }
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
  Engine(Checkpoint ck, const EngineOptions& opt);
  Checkpoint ck_;
  EngineOptions opt_;
  std::optional<Tokenizer> tok_;
  std::unique_ptr<Backend> be_;
  ModelWeights weights_;  // as the backend reads them (destroyed before the backend)
  std::unique_ptr<Model> model_;
};

}  // namespace dg
