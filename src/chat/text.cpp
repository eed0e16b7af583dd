#include "chat/text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

namespace dg {
namespace {

// Decodes the UTF-8 character at s[i]; returns its code point and byte length (invalid bytes: U+FFFD, 1).
char32_t decode_at(std::string_view s, size_t i, size_t* len) {
  const auto c = static_cast<unsigned char>(s[i]);
  int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + static_cast<size_t>(n) > s.size()) {
    *len = 1;
    return 0xFFFD;
  }
  char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
    if ((b >> 6) != 2) {
      *len = 1;
      return 0xFFFD;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  *len = static_cast<size_t>(n);
  return cp;
}

bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace

size_t utf8_len_at(std::string_view s, size_t i) {
  size_t len = 0;
  decode_at(s, i, &len);
  return len;
}

size_t py_space_len(std::string_view s, size_t i) {
  size_t len = 0;
  return is_py_space(decode_at(s, i, &len)) ? len : 0;
}

std::string py_strip(std::string_view s) {
  size_t b = 0;
  while (b < s.size()) {
    const size_t n = py_space_len(s, b);
    if (n == 0) break;
    b += n;
  }
  // Scan forward remembering where the last non-space character ends.
  size_t end = b, i = b;
  while (i < s.size()) {
    const size_t n = py_space_len(s, i);
    if (n > 0) {
      i += n;
      continue;
    }
    size_t len = 0;
    decode_at(s, i, &len);
    i += len;
    end = i;
  }
  return std::string(s.substr(b, end - b));
}

std::string strip_thinking_text(std::string_view s) {
  static constexpr std::string_view kOpen = "<|channel>", kClose = "<channel|>";
  std::string out;
  size_t pos = 0;
  for (;;) {
    const size_t close = s.find(kClose, pos);
    const std::string_view part = s.substr(pos, close == std::string_view::npos ? std::string_view::npos : close - pos);
    const size_t open = part.find(kOpen);
    out.append(part.substr(0, open));
    if (close == std::string_view::npos) break;
    pos = close + kClose.size();
  }
  return py_strip(out);
}

std::vector<std::string> dictsort_keys(std::vector<std::string> keys) {
  auto lower = [](const std::string& k) {
    std::string l = k;
    for (char& c : l)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return l;
  };
  std::stable_sort(keys.begin(), keys.end(), [&](const std::string& a, const std::string& b) { return lower(a) < lower(b); });
  return keys;
}

std::string py_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string sci(buf, r.ptr);  // "-1.2345e+17": shortest round-trip digits
  const size_t e = sci.find('e');
  const bool neg = sci[0] == '-';
  std::string digits;
  for (size_t i = neg ? 1 : 0; i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  const int exp = std::stoi(sci.substr(e + 1));
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exp - 1), '0');
      out += digits;
    } else {
      const size_t int_len = static_cast<size_t>(exp) + 1;
      if (digits.size() <= int_len) {
        out += digits;
        out.append(int_len - digits.size(), '0');
        out += ".0";
      } else {
        out.append(digits, 0, int_len);
        out += '.';
        out.append(digits, int_len);
      }
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) {
    out += '.';
    out.append(digits, 1);
  }
  const int a = std::abs(exp);
  out += fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', a);
  return out;
}

}  // namespace dg
