// A tiny, valid DiffusionGemma checkpoint on disk (HF 5.17 save layout, SPEC.md §1.2) for loader and model
// tests: vocab 64, hidden 16, intermediate 24, expert_ff 8, 3 layers [sliding, sliding, full], 2 heads, 1 KV
// head, head_dim 8 (full layer 16), 4 experts top-2, window 4, canvas 8. Weights are seeded random values drawn
// as SPEC.md §6 suggests (norm weights 1 + 0.3·N, distinct encoder and decoder layer_scalars).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "io/model_config.h"

namespace dg::test {

struct TinyOptions {
  bool global_head_dim_style = false;  // full-layer dims as global_head_dim/num_global_key_value_heads
  bool sharded = false;                // model.safetensors.index.json + two shards
  bool with_vision = false;            // add model.encoder.vision_tower.* and embed_vision.* tensors
  bool with_lm_head = false;           // add lm_head.weight (a copy of the embedding)
  bool with_encoder_copies = false;    // add model.encoder.language_model.* copies of decoder tensors
  bool with_generation_config = true;  // write generation_config.json
  DType dtype = DType::kF32;           // dtype of every weight
  uint64_t seed = 1;
};

// config.json contents; tests may edit the object before writing it.
nlohmann::json tiny_config_json(const TinyOptions& o = {});
// generation_config.json contents (flat HF 5.17 spelling).
nlohmann::json tiny_generation_config_json();
ModelConfig tiny_model_config(const TinyOptions& o = {});
// Every tensor the checkpoint holds (text tensors in expected_weights order, then the optional extras).
std::vector<std::pair<std::string, Tensor>> tiny_tensors(const ModelConfig& cfg, const TinyOptions& o = {});

// Writes config.json, generation_config.json and the tensors of `tensors` into `dir` (single file or sharded).
void write_checkpoint(const std::string& dir, const nlohmann::json& config,
                      const std::vector<std::pair<std::string, Tensor>>& tensors, const TinyOptions& o = {});
// A fresh scratch directory holding a complete tiny checkpoint; returns its path.
std::string make_tiny_checkpoint(const std::string& tag, const TinyOptions& o = {});

// Raw file helpers for building malformed inputs.
void write_text_file(const std::string& path, const std::string& text);
std::vector<uint8_t> read_bytes(const std::string& path);
void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes);
// A safetensors file from a literal header text and data bytes; `header_len` overrides the length field.
void write_raw_safetensors(const std::string& path, const std::string& header, const std::vector<uint8_t>& data,
                           std::optional<uint64_t> header_len = std::nullopt);

}  // namespace dg::test
