#include "diffusion/sampler_settings.h"

#include <cmath>

#include <fmt/format.h>

namespace dg {

bool setting_in_range(const SamplerSetting& s, double v) {
  const SettingRange& r = s.range;
  if (std::isnan(v) || (r.lo_open ? !(v > r.lo) : !(v >= r.lo)) || (r.hi_open ? !(v < r.hi) : !(v <= r.hi)))
    return false;
  return std::visit(
      [&](auto m) {
        using T = SettingType<decltype(m)>;
        if constexpr (std::is_integral_v<T>)
          return v >= static_cast<double>(std::numeric_limits<T>::min()) &&
                 v <= static_cast<double>(std::numeric_limits<T>::max());
        return true;
      },
      s.member);
}

std::string setting_range_text(const SamplerSetting& s) {
  const SettingRange& r = s.range;
  if (std::isinf(r.hi)) return fmt::format("{} {}", r.lo_open ? ">" : ">=", r.lo);
  if (!r.lo_open && !r.hi_open) return fmt::format("between {} and {}", r.lo, r.hi);
  return fmt::format("in {}{}, {}{}", r.lo_open ? "(" : "[", r.lo, r.hi, r.hi_open ? ")" : "]");
}

std::string setting_text(const SamplerSetting& s, const SamplerOptions& o) {
  return std::visit(
      [&](auto m) {
        for (const SettingWord& w : s.words)
          if (static_cast<double>(o.*m) == w.value) return std::string(w.word);
        return fmt::format("{}", o.*m);
      },
      s.member);
}

void setting_assign(const SamplerSetting& s, SamplerOptions& o, double v) {
  std::visit(
      [&](auto m) {
        using T = SettingType<decltype(m)>;
        if constexpr (std::is_same_v<T, bool>) {
          o.*m = v != 0;
        } else {
          o.*m = static_cast<T>(v);
        }
      },
      s.member);
}

}  // namespace dg
