// JsonSchema: the subset of JSON Schema the engine can both check and enforce while generating (docs/TOOLS.md):
// type (one or a list of object, array, string, integer, number, boolean, null), properties, required,
// additionalProperties (a boolean), items, minItems, maxItems, enum and const (scalar values), nullable, and the
// annotations title, description, default, examples, format, $schema, $id, $comment. Any other keyword is an error
// that names it and where it is. Compiled into a flat node table: what SchemaGrammar (json_schema_grammar.h) walks
// token by token and what validate() checks a parsed value against (tool-call arguments, structured output).
// Names and enum values are spelt twice: as JSON text, and as a Gemma 4 tool call's arguments write them (Syntax::kCall
// in json_grammar.h: bare keys where the name allows, strings between kQuoteByte).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dg {

using SchemaJson = nlohmann::ordered_json;

struct SchemaNode {
  enum Type : uint8_t {
    kObject = 1, kArray = 2, kString = 4, kInteger = 8, kNumber = 16, kBoolean = 32, kNull = 64, kAny = 127,
  };
  uint8_t types = kAny;
  struct Property {
    std::string name;
    std::string key;       // the name as a JSON string, quotes included: what the text must spell
    std::string call_key;  // the name in a call: bare, or between kQuoteByte when it cannot be bare
    int node = 0;
  };
  std::vector<Property> properties;  // at most kMaxProperties
  uint64_t required = 0;             // bit i: properties[i] is required
  bool additional = true;            // properties not listed are allowed (any value)
  int items = -1;                    // the node of array items; -1: any value
  int min_items = 0, max_items = -1;  // -1: no limit
  std::vector<std::string> allowed;  // enum / const: each allowed value as canonical JSON text; empty: any
  std::vector<std::string> call_allowed;  // the same values as a call writes them
  int min_bytes = 1;                 // the shortest text of a value this node accepts
  int call_min_bytes = 1;            // the same in a call
};

class JsonSchema {
 public:
  static constexpr int kMaxProperties = 64;
  static constexpr int kMaxEnum = 64;
  static constexpr int kMaxDepth = 16;  // nested schema levels

  // Throws dg::Error naming the unsupported keyword or bad value and its path ("schema.properties.city.pattern").
  // `root_object`: the root must accept only objects (structured output and tool parameters are objects).
  static std::shared_ptr<const JsonSchema> compile(const SchemaJson& schema, const std::string& where = "schema",
                                                   bool root_object = true);

  // What is wrong with `value` ("$.city: expected a string, got 3"), empty when it conforms.
  std::vector<std::string> validate(const SchemaJson& value) const;

  const SchemaNode& node(int i) const { return nodes_[static_cast<size_t>(i)]; }
  const SchemaJson& source() const { return source_; }
  // Whether the root accepts an object, and the shortest one (JSON text, or a call's arguments): tool parameters
  // are compiled without root_object and may allow other types too.
  bool root_accepts_object() const;
  int root_object_bytes(bool call) const { return root_object_bytes_[call ? 1 : 0]; }

 private:
  int add(const SchemaJson& s, const std::string& where, int depth);
  void check(const SchemaJson& v, int node, const std::string& path, std::vector<std::string>& out) const;
  int min_bytes(int node, bool call) const;
  int object_bytes(int node, bool call) const;

  std::vector<SchemaNode> nodes_;
  SchemaJson source_;
  int root_object_bytes_[2] = {2, 2};
};

}  // namespace dg
