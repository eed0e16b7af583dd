// Stable names of forward intermediates, shared by traces, dumps and tests: "enc.l3." / "dec.l3." followed by the
// reference module's name ("self_attn.q_proj", "post_feedforward_layernorm", ...) or "out".
#pragma once

#include <string>

namespace dg {

inline std::string layer_prefix(bool encoder, int l) {
  return std::string(encoder ? "enc.l" : "dec.l") + std::to_string(l) + ".";
}

}  // namespace dg
