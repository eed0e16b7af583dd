// What a pack stores in which format: the weight classes, the profiles and the --set overrides.
// Classes: experts.gate_up / experts.down (the MoE stacks), attn (q/k/v/o), dense (the dense MLP), sc (the
// self-conditioning MLP); embed, router and norms (norm weights and layer scalars) are locked to the source
// dtype. Every profile keeps attn and dense raw and stores sc as q8; the profile names the experts' format.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"

namespace dg {

enum class WeightClass { kEmbed, kAttn, kDense, kRouter, kExpertsGateUp, kExpertsDown, kSc, kNorms };

std::string_view weight_class_name(WeightClass c);
// The class of a text-model tensor (a name of expected_weights); throws dg::Error for any other name.
WeightClass weight_class(const std::string& tensor_name);
bool weight_class_locked(WeightClass c);

// A stored format: nullopt is "raw" (the source bytes verbatim), otherwise a packed DType.
using PackFormat = std::optional<DType>;
std::string pack_format_name(PackFormat f);  // "raw", "q4", ...

struct QuantPolicy {
  std::string profile;                                     // q4 | q6 | nvfp4 | fp8
  std::vector<std::pair<std::string, std::string>> sets;   // the overrides as given: class, format
  std::map<WeightClass, PackFormat> formats;               // every unlocked class, resolved
  PackFormat format_of(WeightClass c) const;               // raw for a locked class
};

// The profile plus "class=format" overrides. `experts` sets both stacks; a specific class (experts.down) beats
// it. Throws dg::Error naming the bad profile, class or format, before any file is opened.
QuantPolicy make_quant_policy(const std::string& profile, const std::vector<std::string>& sets);

}  // namespace dg
