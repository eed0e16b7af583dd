// `diffgemma quantize` as a library call: a Hugging Face checkpoint directory in, a self-contained .dgq pack out.
// Every (tensor, format) constraint is checked before anything is written; the pack is built under a temporary
// name and renamed into place only when complete, so an interrupted or failed run never leaves a loadable pack.
// Memory stays bounded: tensors stream one at a time from the mmap'd shards (src/quant/pack_writer.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "io/safetensors.h"
#include "quant/pack_manifest.h"
#include "quant/policy.h"

namespace dg {

struct QuantizeOptions {
  std::string model_dir;  // a Hugging Face checkpoint directory
  std::string out_dir;    // the pack directory to create
  std::string profile = "q4";
  std::vector<std::string> sets;  // "class=format" overrides
  bool force = false;             // replace an existing pack at out_dir
};

// Source bytes done and in total, after each chunk.
using QuantizeProgress = std::function<void(uint64_t done, uint64_t total)>;

// The manifest a pack of `src` under `policy` gets (tensors in expected_weights order, offsets assigned). Throws
// dg::Error listing every tensor whose shape cannot hold its format.
PackManifest plan_pack(const ModelConfig& cfg, const TensorStore& src, const QuantPolicy& policy);

// Writes the pack and returns its manifest.
PackManifest quantize_model(const QuantizeOptions& o, const QuantizeProgress& progress = {});

}  // namespace dg
