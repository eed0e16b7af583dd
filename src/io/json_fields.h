// Typed, validated reads of JSON fields for the config parsers. Every failure is one dg::Error that names the
// source file and the dotted field path ("config.json: field 'text_config.hidden_size' ...").
// A JSON null reads as absent, as Python's `x or default` / HF's None-means-default convention does.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace dg {

// Parses `text` as JSON; a syntax error becomes dg::Error naming `source`.
nlohmann::json json_parse(const std::string& text, const std::string& source);

// Reads the whole file; a missing or unreadable file becomes dg::Error naming it.
std::string read_text_file(const std::string& path);

class JsonFields {
 public:
  // `obj` must be a JSON object (checked); `prefix` is its dotted path ("" for the root, "text_config.").
  JsonFields(const nlohmann::json& obj, std::string source, std::string prefix);

  bool has(const char* key) const;                   // present and not null
  bool is_null(const char* key) const;               // present and explicitly null
  const nlohmann::json* get(const char* key) const;  // nullptr when absent or null
  std::string path(const char* key) const { return prefix_ + key; }
  const std::string& source() const { return source_; }

  // Integers: JSON integers, or floats with an integral value; must fit [lo, hi].
  std::optional<int64_t> opt_int(const char* key, int64_t lo, int64_t hi) const;
  int64_t req_int(const char* key, int64_t lo, int64_t hi) const;
  std::optional<double> opt_num(const char* key) const;  // finite numbers only
  double req_num(const char* key) const;
  std::optional<bool> opt_bool(const char* key) const;
  std::optional<std::string> opt_str(const char* key) const;
  JsonFields sub(const char* key) const;  // a nested object; the key must be present

  [[noreturn]] void fail_field(const char* key, const std::string& why) const;

 private:
  const nlohmann::json& obj_;
  std::string source_;
  std::string prefix_;
};

// Integer conversion of one JSON value with the same rules; `what` names it in the message.
int64_t json_int(const nlohmann::json& v, int64_t lo, int64_t hi, const std::string& source, const std::string& what);

}  // namespace dg
