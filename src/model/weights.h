// The DiffusionGemma weight table: every tensor the text model needs, by checkpoint name, with its expected
// shape. Reference: SPEC.md §1.2 (HF 5.17 save layout: decoder tensors + the encoder's own layer_scalars;
// vision tower, lm_head.weight and full encoder copies are recognised and ignored).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/tensor.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "ops/moe/moe.h"

namespace dg {

struct LayerWeights {
  Tensor q, k, v, o;     // [n_heads*D, H], [n_kv*D, H], [n_kv*D, H] (sliding only; empty on full), [H, n_heads*D]
  Tensor q_norm, k_norm;  // [D]
  Tensor gate, up, down;  // dense MLP: [I, H], [I, H], [H, I]
  Tensor router_proj;     // [E, H]
  Tensor router_scale;    // [H]
  Tensor per_expert_scale;  // [E]
  Tensor experts_gate_up;   // [E, 2*expert_ff, H]: rows [0, ff) gate, [ff, 2ff) up
  Tensor experts_down;      // [E, H, expert_ff]
  // The experts' activation operand: bf16, or kFp8 (per-row E4M3, the W8A8 products of fp8 experts; set_expert_act)
  DType experts_act = DType::kBF16;
  Tensor input_norm, post_attn_norm, pre_ff_norm, post_ff_norm, post_ff_norm_1, post_ff_norm_2, pre_ff_norm_2;  // [H]
  float decoder_scalar = 1.0f;  // model.decoder.layers.{i}.layer_scalar
  float encoder_scalar = 1.0f;  // model.encoder.language_model.layers.{i}.layer_scalar

  MoeWeights moe() const {
    return {router_proj, router_scale, per_expert_scale, experts_gate_up, experts_down, experts_act};
  }
};

struct ModelWeights {
  Tensor embed;       // [V, H]; also the tied lm_head and the self-conditioning soft-embedding table
  // Empty, or (--vocab-act, Backend::fp8_table) the W8A8 tables: embed as fp8 rows for the lm_head, and its transpose
  // [H, V] as fp8 rows for the self-conditioning soft embedding.
  Tensor embed_fp8, embed_fp8_t;
  Tensor final_norm;  // [H]
  Tensor sc_pre_norm;            // [H]
  Tensor sc_gate, sc_up, sc_down;  // [I, H], [I, H], [H, I]
  std::vector<LayerWeights> layers;
  DType dtype = DType::kBF16;  // dtype of the embedding (sets the bf16(sqrt(H)) embed-scale rule)
};

// The weight fields of a layer and of the model: member, checkpoint name (after the layer prefix
// "model.decoder.layers.{i}." or "model.decoder."), the name messages use, and what reads it. Loading, binding and
// uploading iterate these tables; the side-by-side groups are the weights that share an input (linears(),
// gated_linear()).
template <class W>
struct WeightField {
  Tensor W::*member;
  const char* checkpoint;
  const char* what;
  WeightUse use;
};
extern const WeightField<LayerWeights> kLayerWeightFields[21];
extern const WeightField<ModelWeights> kModelWeightFields[6];

// Bytes the weights take on a backend that holds an unpacked weight in `plain_bytes` per element (0: as stored);
// packed formats stay as they are.
size_t weight_bytes(const ModelWeights& w, int plain_bytes);

// Places the weights that share an input side by side on the backend (the self-conditioning gate/up, each layer's
// q/k/v and gate/up: Backend::place_side_by_side), as upload_weights does; synthetic weights take it too.
void place_shared_inputs(ModelWeights& w, Backend& be);

// The weights as `be` reads them: every field checked (Backend::check_weight, before the first is copied), uploaded,
// and the groups that share an input placed side by side.
ModelWeights upload_weights(const ModelWeights& host, Backend& be);

struct WeightEntry {
  std::string name;
  Shape shape;
};

// Every tensor name the text model reads, with its expected shape, in a stable order.
std::vector<WeightEntry> expected_weights(const ModelConfig& cfg);

// How a checkpoint tensor name is classified by the loader.
enum class TensorRole { kText, kVision, kIgnoredCopy, kUnknown };
TensorRole classify_tensor_name(const std::string& name);

// The weight table from tensors looked up by checkpoint name (`take` throws for a missing one); layer scalars stay 1.
ModelWeights assemble_weights(const ModelConfig& cfg, const std::function<Tensor(const std::string&)>& take);

// Checks every expected tensor by name, dtype (bf16/f16/f32) and shape, and binds views into the store.
// Throws dg::Error naming the tensor and file on the first problem. Unknown names are reported on stderr.
ModelWeights bind_weights(const ModelConfig& cfg, const TensorStore& store);

// The experts' activation operand by `mode`: "auto" (fp8 where a layer's experts are fp8 weights: the W8A8
// products; bf16 otherwise), "bf16", or "fp8" (every layer's experts must be fp8). Throws naming the mode or layer.
void set_expert_act(ModelWeights& w, const std::string& mode);
// Whether fp8 linears (attention, dense MLP and self-conditioning weights stored fp8) take fp8 activations, the W8A8
// products, by `mode`: "auto" and "fp8" yes, "bf16" no (the input stays bf16, the weights dequantised). Throws for
// another mode. check_linear_act: "fp8" needs at least one fp8 linear in `w` (throws otherwise).
bool linear_act_fp8(const std::string& mode);
void check_linear_act(const ModelWeights& w, const std::string& mode);
// Which products over the vocabulary run as W8A8 over fp8 copies of the tied table, by `mode`: "bf16" neither,
// "fp8" both, "fp8-lm-head" the lm_head alone. Throws for another mode.
struct VocabFp8 {
  bool lm_head = false, soft_embed = false;
};
VocabFp8 vocab_act_fp8(const std::string& mode);
// Makes the fp8 tables `mode` asks for (embed_fp8, embed_fp8_t) on `be`, from w.embed (a weight of `be`).
void set_vocab_act(ModelWeights& w, Backend& be, const std::string& mode);

// Parameter counts by class, for `diffgemma info`.
struct ParamCounts {
  int64_t embed = 0, attention = 0, dense_mlp = 0, router = 0, experts = 0, norms = 0, self_cond = 0;
  int64_t total() const { return embed + attention + dense_mlp + router + experts + norms + self_cond; }
};
ParamCounts count_params(const ModelConfig& cfg);

}  // namespace dg
