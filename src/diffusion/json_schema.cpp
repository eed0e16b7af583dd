#include "diffusion/json_schema.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "core/error.h"
#include "diffusion/json_grammar.h"

namespace dg {
namespace {

constexpr std::string_view kAnnotations[] = {"title", "description", "default", "examples", "format",
                                             "$schema", "$id", "$comment"};

uint8_t type_bit(const std::string& name, const std::string& where) {
  if (name == "object") return SchemaNode::kObject;
  if (name == "array") return SchemaNode::kArray;
  if (name == "string") return SchemaNode::kString;
  if (name == "integer") return SchemaNode::kInteger;
  if (name == "number") return SchemaNode::kNumber | SchemaNode::kInteger;
  if (name == "boolean") return SchemaNode::kBoolean;
  if (name == "null") return SchemaNode::kNull;
  fail("{}.type: unknown type '{}' (expected object, array, string, integer, number, boolean or null)", where, name);
}

std::string type_of(const SchemaJson& v) {
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  if (v.is_string()) return "a string";
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_boolean()) return "a boolean";
  return "null";
}

bool is_integral(const SchemaJson& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return std::isfinite(d) && std::floor(d) == d;
}

uint8_t bits_of(const SchemaJson& v) {
  if (v.is_object()) return SchemaNode::kObject;
  if (v.is_array()) return SchemaNode::kArray;
  if (v.is_string()) return SchemaNode::kString;
  if (v.is_boolean()) return SchemaNode::kBoolean;
  if (v.is_null()) return SchemaNode::kNull;
  return is_integral(v) ? SchemaNode::kInteger : SchemaNode::kNumber;
}

std::string expected(uint8_t types) {
  std::vector<std::string> names;
  const std::pair<uint8_t, const char*> all[] = {{SchemaNode::kObject, "an object"}, {SchemaNode::kArray, "an array"},
                                                 {SchemaNode::kString, "a string"},  {SchemaNode::kNumber, "a number"},
                                                 {SchemaNode::kBoolean, "a boolean"}, {SchemaNode::kNull, "null"}};
  for (const auto& [bit, name] : all)
    if ((types & bit) != 0) names.push_back(name);
  if ((types & SchemaNode::kInteger) != 0 && (types & SchemaNode::kNumber) == 0) names.push_back("an integer");
  return fmt::format("{}", fmt::join(names, " or "));
}

// A name as a call's arguments spell it: bare where every byte may stand in a bare key, else a string.
std::string call_key(const std::string& name) {
  const bool bare = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return JsonGrammar::bare_key_byte(static_cast<uint8_t>(c));
  });
  const std::string q(1, static_cast<char>(kQuoteByte));
  return bare ? name : q + name + q;
}

// A scalar as a call writes it: strings between <|"|> (raw, no escapes), the rest as in JSON.
std::string call_value(const SchemaJson& v) {
  const std::string q(1, static_cast<char>(kQuoteByte));
  return v.is_string() ? q + v.get<std::string>() + q : v.dump();
}

int count_nonneg(const SchemaJson& v, const std::string& where) {
  DG_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= 1 << 20,
           "{} must be a non-negative integer", where);
  return static_cast<int>(v.get<int64_t>());
}

}  // namespace

std::shared_ptr<const JsonSchema> JsonSchema::compile(const SchemaJson& schema, const std::string& where,
                                                      bool root_object) {
  auto s = std::make_shared<JsonSchema>();
  s->source_ = schema;
  s->add(schema, where, 0);
  for (const bool call : {false, true}) s->root_object_bytes_[call ? 1 : 0] = s->object_bytes(0, call);
  if (root_object)
    DG_CHECK(s->nodes_[0].types == SchemaNode::kObject && s->nodes_[0].allowed.empty(),
             "{}: the root must be {{\"type\": \"object\"}} (the output is one JSON object)", where);
  return s;
}

int JsonSchema::add(const SchemaJson& s, const std::string& where, int depth) {
  DG_CHECK(depth < kMaxDepth, "{}: nested deeper than {} levels", where, kMaxDepth);
  DG_CHECK(s.is_object(), "{} must be a JSON object (a schema)", where);
  const int id = static_cast<int>(nodes_.size());
  nodes_.emplace_back();
  SchemaNode n;
  bool nullable = false;
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string& k = it.key();
    const SchemaJson& v = it.value();
    const std::string at = where + "." + k;
    if (std::find(std::begin(kAnnotations), std::end(kAnnotations), k) != std::end(kAnnotations)) continue;
    if (k == "type") {
      n.types = 0;
      if (v.is_string()) {
        n.types = type_bit(v.get<std::string>(), where);
      } else {
        DG_CHECK(v.is_array() && !v.empty(), "{} must be a type name or a non-empty list of them", at);
        for (const SchemaJson& t : v) {
          DG_CHECK(t.is_string(), "{} must list type names", at);
          n.types |= type_bit(t.get<std::string>(), where);
        }
      }
    } else if (k == "properties") {
      DG_CHECK(v.is_object(), "{} must be an object", at);
      DG_CHECK(static_cast<int>(v.size()) <= kMaxProperties, "{}: more than {} properties", at, kMaxProperties);
      for (auto p = v.begin(); p != v.end(); ++p) {
        const int child = add(p.value(), at + "." + p.key(), depth + 1);
        n.properties.push_back({p.key(), SchemaJson(p.key()).dump(), call_key(p.key()), child});
      }
    } else if (k == "required") {
      DG_CHECK(v.is_array(), "{} must be a list of property names", at);
    } else if (k == "additionalProperties") {
      DG_CHECK(v.is_boolean(), "{}: only true or false is supported (not a schema)", at);
      n.additional = v.get<bool>();
    } else if (k == "items") {
      n.items = add(v, at, depth + 1);
    } else if (k == "minItems") {
      n.min_items = count_nonneg(v, at);
    } else if (k == "maxItems") {
      n.max_items = count_nonneg(v, at);
    } else if (k == "enum" || k == "const") {
      const SchemaJson list = k == "enum" ? v : SchemaJson::array({v});
      DG_CHECK(list.is_array() && !list.empty(), "{} must be a non-empty list", at);
      DG_CHECK(static_cast<int>(list.size()) <= kMaxEnum, "{}: more than {} values", at, kMaxEnum);
      for (const SchemaJson& e : list) {
        DG_CHECK(!e.is_object() && !e.is_array(), "{}: only scalar values (strings, numbers, booleans, null) are "
                                                  "supported", at);
        n.allowed.push_back(e.dump());
      }
    } else if (k == "nullable") {
      DG_CHECK(v.is_boolean(), "{} must be true or false", at);
      nullable = v.get<bool>();
    } else {
      fail("{}: unsupported JSON Schema keyword '{}' (supported: type, properties, required, additionalProperties, "
           "items, minItems, maxItems, enum, const, nullable and annotations)", at, k);
    }
  }
  if (nullable) n.types |= SchemaNode::kNull;
  if (s.contains("required")) {
    for (const SchemaJson& r : s["required"]) {
      DG_CHECK(r.is_string(), "{}.required must list property names", where);
      const auto p = std::find_if(n.properties.begin(), n.properties.end(),
                                  [&](const SchemaNode::Property& q) { return q.name == r.get<std::string>(); });
      DG_CHECK(p != n.properties.end(), "{}.required: '{}' is not among the properties", where, r.get<std::string>());
      n.required |= uint64_t{1} << (p - n.properties.begin());
    }
  }
  DG_CHECK(n.max_items < 0 || n.max_items >= n.min_items, "{}: maxItems is below minItems", where);
  if (!n.allowed.empty()) {
    std::vector<std::string> kept;  // values of the wrong type can never be written
    for (const std::string& a : n.allowed)
      if ((bits_of(SchemaJson::parse(a)) & n.types) != 0 ||
          (n.types & SchemaNode::kNumber && bits_of(SchemaJson::parse(a)) == SchemaNode::kInteger))
        kept.push_back(a);
    DG_CHECK(!kept.empty(), "{}: no enum value has an allowed type", where);
    n.allowed = std::move(kept);
    for (const std::string& a : n.allowed) n.call_allowed.push_back(call_value(SchemaJson::parse(a)));
  }
  DG_CHECK(n.types != 0, "{}: no type is allowed", where);
  nodes_[static_cast<size_t>(id)] = std::move(n);
  nodes_[static_cast<size_t>(id)].min_bytes = min_bytes(id, false);
  nodes_[static_cast<size_t>(id)].call_min_bytes = min_bytes(id, true);
  return id;
}

bool JsonSchema::root_accepts_object() const {
  return (nodes_[0].types & SchemaNode::kObject) != 0 && nodes_[0].allowed.empty();
}

int JsonSchema::object_bytes(int id, bool call) const {
  const SchemaNode& n = node(id);
  int b = 2, members = 0;
  for (size_t i = 0; i < n.properties.size(); ++i)
    if ((n.required >> i & 1) != 0) {
      const SchemaNode::Property& p = n.properties[i];
      const SchemaNode& child = node(p.node);
      b += static_cast<int>((call ? p.call_key : p.key).size()) + 1 + (call ? child.call_min_bytes : child.min_bytes);
      ++members;
    }
  return b + std::max(0, members - 1);
}

int JsonSchema::min_bytes(int id, bool call) const {
  const SchemaNode& n = node(id);
  if (!n.allowed.empty()) {
    size_t m = SIZE_MAX;
    for (const std::string& a : call ? n.call_allowed : n.allowed) m = std::min(m, a.size());
    return static_cast<int>(m);
  }
  int best = INT32_MAX;
  if ((n.types & (SchemaNode::kInteger | SchemaNode::kNumber)) != 0) best = 1;
  if ((n.types & SchemaNode::kString) != 0) best = std::min(best, 2);
  if ((n.types & (SchemaNode::kBoolean | SchemaNode::kNull)) != 0) best = std::min(best, 4);
  if ((n.types & SchemaNode::kArray) != 0) {
    const int item = n.items < 0 ? 1 : call ? node(n.items).call_min_bytes : node(n.items).min_bytes;
    best = std::min(best, 2 + n.min_items * item + std::max(0, n.min_items - 1));
  }
  if ((n.types & SchemaNode::kObject) != 0) best = std::min(best, object_bytes(id, call));
  return best;
}

std::vector<std::string> JsonSchema::validate(const SchemaJson& value) const {
  std::vector<std::string> out;
  check(value, 0, "$", out);
  return out;
}

void JsonSchema::check(const SchemaJson& v, int id, const std::string& path, std::vector<std::string>& out) const {
  const SchemaNode& n = node(id);
  const uint8_t bits = bits_of(v);
  const bool type_ok = (n.types & bits) != 0 || (bits == SchemaNode::kInteger && (n.types & SchemaNode::kNumber));
  if (!type_ok) {
    out.push_back(fmt::format("{}: expected {}, got {}", path, expected(n.types), type_of(v)));
    return;
  }
  if (!n.allowed.empty()) {
    const std::string text = v.dump();
    if (std::find(n.allowed.begin(), n.allowed.end(), text) == n.allowed.end())
      out.push_back(fmt::format("{}: {} is not one of {}", path, text, fmt::join(n.allowed, ", ")));
    return;
  }
  if (v.is_object()) {
    for (size_t i = 0; i < n.properties.size(); ++i) {
      const SchemaNode::Property& p = n.properties[i];
      if (v.contains(p.name))
        check(v[p.name], p.node, path + "." + p.name, out);
      else if ((n.required >> i & 1) != 0)
        out.push_back(fmt::format("{}: the required property '{}' is missing", path, p.name));
    }
    if (!n.additional)
      for (auto it = v.begin(); it != v.end(); ++it)
        if (std::none_of(n.properties.begin(), n.properties.end(),
                         [&](const SchemaNode::Property& p) { return p.name == it.key(); }))
          out.push_back(fmt::format("{}: unexpected property '{}'", path, it.key()));
  } else if (v.is_array()) {
    const int size = static_cast<int>(v.size());
    if (size < n.min_items) out.push_back(fmt::format("{}: {} items, at least {} required", path, size, n.min_items));
    if (n.max_items >= 0 && size > n.max_items)
      out.push_back(fmt::format("{}: {} items, at most {} allowed", path, size, n.max_items));
    if (n.items >= 0)
      for (size_t i = 0; i < v.size(); ++i) check(v[i], n.items, fmt::format("{}[{}]", path, i), out);
  }
}

}  // namespace dg
