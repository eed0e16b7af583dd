// dg::Engine: the public entry point. It opens a model (a Hugging Face directory or a .dgq pack: config, generation
// config, weights, tokenizer) on a backend and runs generations (dg::Request in, dg::Event out as they happen,
// dg::Result back). Headers under include/dg/ need only the standard library; the implementation is hidden
// (src/engine/engine.cpp over the internal EngineCore). Every failure throws std::runtime_error whose message names
// the file, option or value at fault. One generation at a time per Engine; generations are deterministic per seed.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dg/events.h"
#include "dg/request.h"

namespace dg {

struct EngineOptions {
  std::string model_dir;        // a checkpoint directory or a .dgq pack; "synthetic:26b-a4b[:bf16|q4|fp8|nvfp4]":
                                // the full shape with random weights made on the backend (no tokenizer)
  std::string backend = "cpu";  // "cpu" | "cuda" (where built in)
  int device = 0;               // CUDA device index
  std::string precision = "f32";     // the CPU reference's activation storage: f32 | bf16 | f16 (CUDA: bf16)
  std::string kv_precision = "f32";  // its KV cache storage: f32 | bf16 | f16 (CUDA: f16)
  int threads = 0;                   // CPU threads; 0: the CPUs this process may use
  int64_t context = 8192;  // tokens a KV cache holds (prompt + answer); device caches are sized to it (a one-shot
                           // generation sizes its cache to the prompt and answer when that is more)
  int64_t kv_ring_slack = 512;
  int64_t prefill_chunk = 4096;  // prompts longer than this are encoded in chunks (bounded activation memory)
  bool check_tensors = false;    // check that every weight is finite before use
  bool verify = false;           // check a .dgq pack's per-tensor checksums before use
  bool graphs = true;            // CUDA: denoise steps replay captured graphs
  bool early_capture = true;     // CUDA: a block's graph captured while its first step runs
  bool fused_commit = true;      // a committed block encoded in the next block's first step's forward
  std::string expert_act = "auto";      // the experts' activation operand: auto | bf16 | fp8
  std::string linear_act = "auto";      // fp8 linears' activation operand: auto | bf16 | fp8
  std::string vocab_act = "bf16";  // the vocabulary products' operands: bf16 | fp8 | fp8-lm-head (E4M3 table copies)
  std::string attention_topk = "off";  // full layers' top-k sparse attention: off | dyn | K (docs/ARCHITECTURE.md)
  std::string tokenizer;  // a tokenizer.json to use instead of the model directory's ("": the directory's; the
                          // synthetic shapes have none of their own)
};

// What the engine opened.
struct ModelInfo {
  std::string dir;
  std::string backend, device;  // the backend's name and its device ("cpu", "NVIDIA H200")
  int64_t vocab = 0;
  int canvas = 0;               // tokens per block
  int layers = 0;
  int64_t max_positions = 0;    // max_position_embeddings; 0: not stated
  bool has_tokenizer = false;
};

class EngineCore;

class Engine {
 public:
  // Throws std::runtime_error naming the model directory (or the file in it) that cannot be opened.
  static std::unique_ptr<Engine> open(const EngineOptions& opt);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  ModelInfo info() const;
  const EngineOptions& options() const;

  // The model's tokenizer (throws without one). `special`: special-token literals in the text become their ids.
  std::vector<int32_t> tokenize(std::string_view text, bool special = false) const;
  std::string detokenize(std::span<const int32_t> ids, bool skip_special = true) const;

  // Runs one generation from an empty cache; `sink` hears its events in order, then the call returns the Result
  // that the DoneEvent carried.
  Result generate(const Request& request, const EventSink& sink = {}) const;

 private:
  explicit Engine(std::unique_ptr<EngineCore> core);
  std::unique_ptr<EngineCore> core_;
};

}  // namespace dg
