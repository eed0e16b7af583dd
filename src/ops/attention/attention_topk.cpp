// The top-k attention rule's names (attention_topk.h): how options spell it and how run records store it.
#include "ops/attention/attention_topk.h"

#include <charconv>

#include "core/error.h"

namespace dg {

AttnTopk attn_topk_from_name(std::string_view name, std::string_view what) {
  if (name == "off") return {};
  if (name == "dyn") return {AttnTopk::Mode::kDyn, 0};
  int64_t k = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), k);
  DG_CHECK(ec == std::errc() && end == name.data() + name.size() && k >= 1 && k <= kAttnTopkMax,
           "{} '{}': expected off, dyn (k = clamp(visible keys / 128, 64, 512) per query row) or a number of keys "
           "from 1 to {}",
           what, name, kAttnTopkMax);
  return {AttnTopk::Mode::kFixed, k};
}

std::string attn_topk_name(const AttnTopk& t) {
  switch (t.mode) {
    case AttnTopk::Mode::kOff: return "off";
    case AttnTopk::Mode::kDyn: return "dyn";
    case AttnTopk::Mode::kFixed: return std::to_string(t.k);
  }
  return "off";
}

}  // namespace dg
