// A UTF-8 lead byte (RFC 3629 table 3-7): the sequence's length and the allowed range of its second byte, which
// rules out overlong forms, surrogates and code points above U+10FFFF. Shared by the tokenizer's validity check
// and JSON mode's byte-level grammar.
#pragma once

#include <cstdint>
#include <optional>

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

}  // namespace dg
