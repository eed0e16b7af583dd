// A UTF-8 lead byte (RFC 3629 table 3-7): the sequence's length and the allowed range of its second byte, which
// rules out overlong forms, surrogates and code points above U+10FFFF; and the validity check built on it. Shared
// by the tokenizer, JSON mode's byte-level grammar and the commands that read prompt text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dg {

struct Utf8Lead {
  int len;             // bytes in the sequence, 2..4
  uint8_t lo, hi;      // the second byte's range
};

// std::nullopt for ASCII, continuation bytes and bytes that never start a valid sequence.
inline std::optional<Utf8Lead> utf8_lead(uint8_t b) {
  if (b >= 0xC2 && b <= 0xDF) return Utf8Lead{2, 0x80, 0xBF};
  if (b >= 0xE0 && b <= 0xEF)
    return Utf8Lead{3, static_cast<uint8_t>(b == 0xE0 ? 0xA0 : 0x80), static_cast<uint8_t>(b == 0xED ? 0x9F : 0xBF)};
  if (b >= 0xF0 && b <= 0xF4)
    return Utf8Lead{4, static_cast<uint8_t>(b == 0xF0 ? 0x90 : 0x80), static_cast<uint8_t>(b == 0xF4 ? 0x8F : 0xBF)};
  return std::nullopt;
}

// Offset of the first byte that does not start a well-formed UTF-8 sequence, or std::nullopt.
inline std::optional<size_t> utf8_invalid_offset(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t b = p[i];
    if (b < 0x80) {
      ++i;
      continue;
    }
    const std::optional<Utf8Lead> lead = utf8_lead(b);
    if (!lead) return i;
    const auto len = static_cast<size_t>(lead->len);
    if (i + len > n || p[i + 1] < lead->lo || p[i + 1] > lead->hi) return i;
    for (size_t k = 2; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return i;
    }
    i += len;
  }
  return std::nullopt;
}

}  // namespace dg
