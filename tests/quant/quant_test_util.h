// Helpers of the pack tests: quantize a fixture into a scratch directory, edit a pack's manifest, and build the
// dequantised twin of a pack (an f32 Hugging Face directory holding every weight as the pack decodes it).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dg::test {

// Quantizes `model_dir` into a fresh scratch directory and returns the pack's path.
std::string quantize_fixture(const std::string& tag, const std::string& model_dir, const std::string& profile,
                             const std::vector<std::string>& sets = {});

// Copies a pack to a fresh scratch directory, applies `edit` to its manifest JSON, and returns the copy's path.
std::string edited_pack(const std::string& pack, const std::function<void(nlohmann::json&)>& edit);

// Writes an f32 safetensors checkpoint whose tensors are the pack's decoded weights (config and sidecars copied)
// and returns its path.
std::string dequantised_twin(const std::string& pack);

}  // namespace dg::test
