// Synthetic models for benchmarks: the published DiffusionGemma 26B-A4B structure (or a slice of its layers)
// with weights generated on the backend from a seed, so a full-shape run needs no checkpoint files.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/registry.h"
#include "io/model_config.h"
#include "model/checkpoint.h"
#include "model/weights.h"

namespace dg {

// google/diffusiongemma-26B-A4B-it's structure (SPEC.md §1): 30 layers, hidden 2816, 128 experts top-8, ...
// `layers` > 0 keeps the first that many layers (the last kept layer is made full, as the reference requires).
ModelConfig diffusiongemma_26b_config(int layers = 0);

// The weight profiles a synthetic model takes (synthetic_weights says what each stores), and how the command lines
// spell the model: "synthetic:26b-a4b[:bf16|q4|...]".
inline constexpr std::array<std::string_view, 6> kSyntheticProfiles{"bf16", "q4", "fp8", "nvfp4", "fp8-all",
                                                                    "q4-fp8"};
std::string synthetic_model_pattern();

// "synthetic:26b-a4b[:PROFILE]" -> PROFILE (bf16 when absent); nullopt for anything else (a directory). Throws
// dg::Error for an unknown profile.
std::optional<std::string> synthetic_profile(const std::string& model);
// The checkpoint a synthetic model stands for: `model` as its directory, diffusiongemma_26b_config(layers), no files,
// no tokenizer, the default generation settings.
Checkpoint synthetic_checkpoint(const std::string& model, int layers = 0);

// One tensor of the synthetic model: its checkpoint name, shape and recipe (element i is synthetic_uniform(seed, i,
// scale, offset), src/ops/elementwise/synthetic_uniform.h); `kind` marks what the packed profiles store packed.
struct SyntheticTensor {
  enum class Kind : uint8_t { kPlain, kLinear, kSelfCondLinear, kExperts };  // kLinear: attention and dense MLP
  std::string name;
  Shape shape;
  uint64_t seed = 0;
  float scale = 0.0f, offset = 0.0f;
  Kind kind = Kind::kPlain;
};

// Every text weight of `cfg` in the generator's draw order (seeds seed * 1000003 + 1, + 2, ...), by checkpoint
// name: synthetic_weights draws them on a backend, dg_write_checkpoint (tools/) writes them as a checkpoint.
std::vector<SyntheticTensor> synthetic_plan(const ModelConfig& cfg, uint64_t seed);

// Weights of `cfg`'s shapes in the backend's activation dtype, uniform with scales like the fixtures' recipe
// (norms near 1, linears ~ 1/sqrt(fan_in), experts 0.15, embedding 0.8, a wide router).
// `profile` bf16 keeps every weight bf16; q4 | fp8 | nvfp4 makes the experts that packed format (random codes,
// finite scales, |w| <= 0.15 sqrt 3) and the self-conditioning MLP q8, as `diffgemma quantize --profile` stores them;
// fp8-all makes the experts, the attention and dense MLP linears and the self-conditioning MLP fp8; q4-fp8 the
// experts q4 and those linears fp8 (quantize --profile q4 --set attn=fp8 --set dense=fp8 --set sc=fp8).
// `peaked` > 0: the tied table's rows past the first `peaked` scaled by kPeakedRest, so the logits of a canvas are as
// peaked as a trained model's (the first tokens' logits saturate the softcap, the rest stay within a few units of
// 0) and the contract sampler's survivor cutoff keeps some of those tokens (64: about 18 a row by the table's
// spread, an estimate), where the uniform table leaves most of the vocabulary within the cutoff.
inline constexpr float kPeakedRest = 0.02f;
ModelWeights synthetic_weights(const ModelConfig& cfg, Backend& be, uint64_t seed, const std::string& profile = "bf16",
                               int64_t peaked = 0);
// The bytes synthetic_weights makes on a backend whose activations take `act_bytes` per element (packed tensors as
// their planes).
size_t synthetic_weight_bytes(const ModelConfig& cfg, const std::string& profile, int act_bytes);
// Those weights by storage format ("BF16" for the unpacked ones at `act_bytes` per element, "q4", "fp8", ...):
// tensors and bytes, most bytes first (`diffgemma info -m synthetic:26b-a4b[:PROFILE]`).
struct SyntheticFormat {
  std::string format;
  int tensors = 0;
  size_t bytes = 0;
};
std::vector<SyntheticFormat> synthetic_formats(const ModelConfig& cfg, const std::string& profile, int act_bytes);

}  // namespace dg
