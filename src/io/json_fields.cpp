#include "io/json_fields.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace dg {

using nlohmann::json;

json json_parse(const std::string& text, const std::string& source) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail("{}: malformed JSON: {}", source, e.what());
  }
}

std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open '{}'", path);
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) fail("cannot read '{}'", path);
  return ss.str();
}

namespace {

const char* type_word(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    default:
      return "an unsupported value";
  }
}

}  // namespace

int64_t json_int(const json& v, int64_t lo, int64_t hi, const std::string& source, const std::string& what) {
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) fail("{}: {} = {} is out of range [{}, {}]", source, what, u, lo, hi);
    x = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || d < static_cast<double>(lo) || d > static_cast<double>(hi))
      fail("{}: {} must be an integer in [{}, {}], got {}", source, what, lo, hi, d);
    x = static_cast<int64_t>(d);
  } else {
    fail("{}: {} must be an integer, got {}", source, what, type_word(v));
  }
  if (x < lo || x > hi) fail("{}: {} = {} is out of range [{}, {}]", source, what, x, lo, hi);
  return x;
}

JsonFields::JsonFields(const json& obj, std::string source, std::string prefix)
    : obj_(obj), source_(std::move(source)), prefix_(std::move(prefix)) {
  if (!obj_.is_object()) {
    if (prefix_.empty()) fail("{}: expected a JSON object at the top level, got {}", source_, type_word(obj_));
    fail("{}: '{}' must be an object, got {}", source_, prefix_.substr(0, prefix_.size() - 1), type_word(obj_));
  }
}

const json* JsonFields::get(const char* key) const {
  auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool JsonFields::has(const char* key) const { return get(key) != nullptr; }

bool JsonFields::is_null(const char* key) const {
  auto it = obj_.find(key);
  return it != obj_.end() && it->is_null();
}

void JsonFields::fail_field(const char* key, const std::string& why) const {
  fail("{}: field '{}' {}", source_, path(key), why);
}

std::optional<int64_t> JsonFields::opt_int(const char* key, int64_t lo, int64_t hi) const {
  const json* v = get(key);
  if (v == nullptr) return std::nullopt;
  return json_int(*v, lo, hi, source_, fmt::format("field '{}'", path(key)));
}

int64_t JsonFields::req_int(const char* key, int64_t lo, int64_t hi) const {
  auto v = opt_int(key, lo, hi);
  if (!v) fail("{}: missing required field '{}'", source_, path(key));
  return *v;
}

std::optional<double> JsonFields::opt_num(const char* key) const {
  const json* v = get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) fail_field(key, fmt::format("must be a number, got {}", type_word(*v)));
  const double d = v->get<double>();
  if (!std::isfinite(d)) fail_field(key, "must be finite");
  return d;
}

double JsonFields::req_num(const char* key) const {
  auto v = opt_num(key);
  if (!v) fail("{}: missing required field '{}'", source_, path(key));
  return *v;
}

std::optional<bool> JsonFields::opt_bool(const char* key) const {
  const json* v = get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) fail_field(key, fmt::format("must be true or false, got {}", type_word(*v)));
  return v->get<bool>();
}

std::optional<std::string> JsonFields::opt_str(const char* key) const {
  const json* v = get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) fail_field(key, fmt::format("must be a string, got {}", type_word(*v)));
  return v->get<std::string>();
}

JsonFields JsonFields::sub(const char* key) const {
  const json* v = get(key);
  if (v == nullptr) fail("{}: missing required field '{}'", source_, path(key));
  return JsonFields(*v, source_, path(key) + ".");
}

}  // namespace dg
