// Text helpers with the reference template's semantics: Python's str.strip() (Jinja `trim`), the template's
// strip_thinking on model content, Jinja's case-insensitive `dictsort` key order, and Python's float repr.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dg {

// Strips leading and trailing whitespace as Python's str.strip() does (ASCII and Unicode White_Space).
std::string py_strip(std::string_view s);
// Length in bytes of the whitespace character at s[i] (0 if none), Python's str.isspace() set.
size_t py_space_len(std::string_view s, size_t i);
// Byte length of the UTF-8 character at s[i] (1 for an invalid byte).
size_t utf8_len_at(std::string_view s, size_t i);
// Drops every "<|channel>...<channel|>" span written as text, then strips (the template's strip_thinking).
std::string strip_thinking_text(std::string_view s);
// Keys in Jinja dictsort order: case-insensitive (ASCII lower-case), stable.
std::vector<std::string> dictsort_keys(std::vector<std::string> keys);
// Python's repr of a float: shortest round-trip digits, "1.0", "1e+16", "1e-05", "inf", "nan".
std::string py_float_repr(double v);

}  // namespace dg
