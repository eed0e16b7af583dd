#include "chat/tools_render.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "chat/text.h"

namespace dg {
namespace {

const Json* get(const Json& v, const char* key) {
  if (!v.is_object()) return nullptr;
  const auto it = v.find(key);
  return it == v.end() ? nullptr : &*it;
}

// Jinja truthiness of a possibly missing value.
bool truthy(const Json* v) {
  if (v == nullptr || v->is_null()) return false;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_number_integer()) return v->get<int64_t>() != 0;
  if (v->is_number()) return v->get<double>() != 0.0;
  if (v->is_string()) return !v->get<std::string>().empty();
  return !v->empty();
}

std::string upper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return s;
}

// What `{{ v }}` prints for a value (Python str()).
std::string py_str(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number_float()) return py_float_repr(v.get<double>());
  if (v.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) s += ", ";
      if (v[i].is_string()) s += '\'';
      s += py_str(v[i]);
      if (v[i].is_string()) s += '\'';
    }
    return s + "]";
  }
  return v.dump();
}

// `v | upper` (a missing value is undefined and prints nothing).
std::string upper_of(const Json* v) { return v == nullptr ? std::string() : upper(py_str(*v)); }

std::vector<std::string> sorted_keys(const Json& obj) {
  std::vector<std::string> keys;
  for (auto it = obj.begin(); it != obj.end(); ++it) keys.push_back(it.key());
  return dictsort_keys(std::move(keys));
}

void quoted_list(IdWriter& w, const Json* list) {
  w.text("[");
  if (list != nullptr && list->is_array())
    for (size_t i = 0; i < list->size(); ++i) {
      if (i) w.text(",");
      w.quoted(py_str((*list)[i]));
    }
  w.text("]");
}

void render_items(IdWriter& w, const Json& items);

// The template's format_parameters: one `key:{…}` per property, in dictsort order.
void render_properties(IdWriter& w, const Json& props, bool filter_keys) {
  static constexpr std::array<const char*, 5> kStandard = {"description", "type", "properties", "required", "nullable"};
  bool first = true;
  for (const std::string& key : sorted_keys(props)) {
    if (filter_keys && std::find(kStandard.begin(), kStandard.end(), key) != kStandard.end()) continue;
    const Json& value = props[key];
    if (!first) w.text(",");
    first = false;
    w.text(key + ":{");
    bool add_comma = false;
    auto comma = [&] {
      if (add_comma) w.text(",");
      add_comma = true;
    };
    if (truthy(get(value, "description"))) {
      w.text("description:");
      w.quoted(py_str(*get(value, "description")));
      add_comma = true;
    }
    const std::string type = upper_of(get(value, "type"));
    if (type == "STRING") {
      if (truthy(get(value, "enum"))) {
        comma();
        w.text("enum:");
        render_argument(w, *get(value, "enum"), true);
      }
    } else if (type == "ARRAY") {
      const Json* items = get(value, "items");
      if (items != nullptr && items->is_object() && !items->empty()) {
        comma();
        render_items(w, *items);
      }
    }
    if (truthy(get(value, "nullable"))) {
      comma();
      w.text("nullable:true");
    }
    if (type == "OBJECT") {
      const Json* nested = get(value, "properties");
      if (nested != nullptr && nested->is_object()) {
        comma();
        w.text("properties:{");
        render_properties(w, *nested, false);
        w.text("}");
      } else if (value.is_object()) {
        comma();
        w.text("properties:{");
        render_properties(w, value, true);
        w.text("}");
      }
      if (truthy(get(value, "required"))) {
        comma();
        w.text("required:");
        quoted_list(w, get(value, "required"));
      }
    }
    comma();
    w.text("type:");
    w.quoted(type);
    w.text("}");
  }
}

// `items:{…}` of an array property: every non-null member of the items schema in dictsort order.
void render_items(IdWriter& w, const Json& items) {
  w.text("items:{");
  bool first = true;
  for (const std::string& key : sorted_keys(items)) {
    const Json& v = items[key];
    if (v.is_null()) continue;
    if (!first) w.text(",");
    first = false;
    if (key == "properties") {
      w.text("properties:{");
      if (v.is_object()) render_properties(w, v, false);
      w.text("}");
    } else if (key == "required") {
      w.text("required:");
      quoted_list(w, &v);
    } else if (key == "type") {
      w.text("type:");
      if (v.is_array()) {
        Json up = Json::array();
        for (const Json& t : v) up.push_back(upper(py_str(t)));
        render_argument(w, up, true);
      } else {
        w.quoted(upper(py_str(v)));
      }
    } else {
      w.text(key + ":");
      render_argument(w, v, true);
    }
  }
  w.text("}");
}

}  // namespace

void render_argument(IdWriter& w, const Json& v, bool escape_keys) {
  if (v.is_string()) {
    w.quoted(v.get<std::string>());
  } else if (v.is_boolean()) {
    w.text(v.get<bool>() ? "true" : "false");
  } else if (v.is_object()) {
    w.text("{");
    bool first = true;
    for (const std::string& key : sorted_keys(v)) {
      if (!first) w.text(",");
      first = false;
      if (escape_keys)
        w.quoted(key);
      else
        w.text(key);
      w.text(":");
      render_argument(w, v[key], escape_keys);
    }
    w.text("}");
  } else if (v.is_array()) {
    w.text("[");
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) w.text(",");
      render_argument(w, v[i], escape_keys);
    }
    w.text("]");
  } else {
    w.text(py_str(v));
  }
}

void render_declaration(IdWriter& w, const Json& tool) {
  const Json& f = tool.at("function");
  w.text(fmt::format("declaration:{}{{description:", py_str(f.at("name"))));
  const Json* desc = get(f, "description");
  w.quoted(desc == nullptr ? std::string() : py_str(*desc));
  const Json* params = get(f, "parameters");
  if (truthy(params)) {
    w.text(",parameters:{");
    if (truthy(get(*params, "properties"))) {
      w.text("properties:{");
      if (get(*params, "properties")->is_object()) render_properties(w, *get(*params, "properties"), false);
      w.text("},");
    }
    if (truthy(get(*params, "required"))) {
      w.text("required:");
      quoted_list(w, get(*params, "required"));
      w.text(",");
    }
    if (truthy(get(*params, "type"))) {
      w.text("type:");
      w.quoted(upper_of(get(*params, "type")));
      w.text("}");
    }
  }
  if (const Json* r = get(f, "response"); r != nullptr) {
    w.text(",response:{");
    if (truthy(get(*r, "description"))) {
      w.text("description:");
      w.quoted(py_str(*get(*r, "description")));
      w.text(",");
    }
    if (upper_of(get(*r, "type")) == "OBJECT") {
      w.text("type:");
      w.quoted("OBJECT");
      w.text("}");
    }
  }
  w.text("}");
}

void render_call(IdWriter& w, const ToolCall& c) {
  w.marker(w.tokens().call_open);
  w.text(fmt::format("call:{}{{", c.name));
  if (c.arguments.is_object()) {
    bool first = true;
    for (const std::string& key : sorted_keys(c.arguments)) {
      if (!first) w.text(",");
      first = false;
      w.text(key + ":");
      render_argument(w, c.arguments[key], false);
    }
  } else if (c.arguments.is_string()) {
    w.text(c.arguments.get<std::string>());
  }
  w.text("}");
  w.marker(w.tokens().call_close);
}

void render_response(IdWriter& w, const std::string& name, const Json& response) {
  w.marker(w.tokens().response_open);
  w.text(fmt::format("response:{}{{", name));
  if (response.is_object()) {
    bool first = true;
    for (const std::string& key : sorted_keys(response)) {
      if (!first) w.text(",");
      first = false;
      w.text(key + ":");
      render_argument(w, response[key], false);
    }
  } else {
    w.text("value:");
    render_argument(w, response, false);
  }
  w.text("}");
  w.marker(w.tokens().response_close);
}

}  // namespace dg
