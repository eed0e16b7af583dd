// Synthetic models for benchmarks: the published DiffusionGemma 26B-A4B structure (or a slice of its layers)
// with weights generated on the backend from a seed, so a full-shape run needs no checkpoint files.
#pragma once

#include <cstdint>
#include <string>

#include "backend/backend.h"
#include "io/model_config.h"
#include "model/weights.h"

namespace dg {

// google/diffusiongemma-26B-A4B-it's structure (SPEC.md §1): 30 layers, hidden 2816, 128 experts top-8, ...
// `layers` > 0 keeps the first that many layers (the last kept layer is made full, as the reference requires).
ModelConfig diffusiongemma_26b_config(int layers = 0);

// Weights of `cfg`'s shapes in the backend's activation dtype, uniform with scales like the fixtures' recipe
// (norms near 1, linears ~ 1/sqrt(fan_in), experts 0.15, embedding 0.8, a wide router).
// `profile` bf16 keeps every weight bf16; q4 | fp8 | nvfp4 makes the experts that packed format (random codes,
// finite scales, |w| <= 0.15 sqrt 3) and the self-conditioning MLP q8, as `diffgemma quantize --profile` stores them.
ModelWeights synthetic_weights(const ModelConfig& cfg, Backend& be, uint64_t seed, const std::string& profile = "bf16");

}  // namespace dg
