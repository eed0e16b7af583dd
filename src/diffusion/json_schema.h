// JsonSchema: the subset of JSON Schema the engine can both check and enforce while generating (docs/TOOLS.md):
// type (one or a list of object, array, string, integer, number, boolean, null), properties, required,
// additionalProperties (a boolean), items, minItems, maxItems, enum and const (scalar values), nullable, and the
// annotations title, description, default, examples, format, $schema, $id, $comment. Any other keyword is an error
// that names it and where it is. Compiled into a flat node table: what SchemaGrammar (json_schema_grammar.h) walks
// token by token and what validate() checks a parsed value against (tool-call arguments, structured output).
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
    std::string key;  // the name as a JSON string, quotes included: what the text must spell
    int node = 0;
  };
  std::vector<Property> properties;  // at most kMaxProperties
  uint64_t required = 0;             // bit i: properties[i] is required
  bool additional = true;            // properties not listed are allowed (any value)
  int items = -1;                    // the node of array items; -1: any value
  int min_items = 0, max_items = -1;  // -1: no limit
  std::vector<std::string> allowed;  // enum / const: each allowed value as canonical JSON text; empty: any
  int min_bytes = 1;                 // the shortest text of a value this node accepts
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

 private:
  int add(const SchemaJson& s, const std::string& where, int depth);
  void check(const SchemaJson& v, int node, const std::string& path, std::vector<std::string>& out) const;
  int min_bytes(int node) const;

  std::vector<SchemaNode> nodes_;
  SchemaJson source_;
};

}  // namespace dg
