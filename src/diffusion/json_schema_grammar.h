// SchemaGrammar: JsonGrammar with a JsonSchema on top, byte by byte: a prefix is accepted only while it can still
// become one JSON object that validates — the types a value may start with, property names spelt as the schema
// spells them (each at most once; others only where additionalProperties allows), enum and const values spelt
// canonically (nlohmann's dump), integers without fraction or exponent, no '}' before every required property, no
// ',' when nothing may follow, array lengths within minItems/maxItems, numbers within a double's range. closing_bytes() is the exact length of the
// shortest completion (the required properties written with their shortest values), so some byte always brings it
// down by one: JSON mode's closing walk (json_commit.h) ends within that many tokens. Without a schema it is
// JsonGrammar. Copied per candidate token: no heap, a fixed frame stack.
// With Syntax::kCall it walks a tool call's arguments (call_grammar.h): the same rules over the call's spelling of
// names and values (JsonSchema's call_key, call_allowed); where the schema lists names, a key written as a string
// must be one of them.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "diffusion/json_grammar.h"
#include "diffusion/json_schema.h"

namespace dg {

class SchemaGrammar {
 public:
  static constexpr int kMaxFrames = 32;  // open containers under a schema
  // Numbers stay within a double's range, so the text always parses: at most this many digits before the point and
  // in the exponent (|x| < 1e299).
  static constexpr int kMaxIntDigits = 200;
  static constexpr int kMaxExpDigits = 2;

  explicit SchemaGrammar(const JsonSchema* schema = nullptr, Syntax syntax = Syntax::kJson)
      : lex_(syntax), schema_(schema) {}

  bool feed(uint8_t byte);  // false (and the state unchanged) when the byte cannot continue a valid prefix
  bool feed(std::string_view bytes);
  bool accepts(std::string_view bytes) const {
    SchemaGrammar g = *this;
    return g.feed(bytes);
  }
  bool complete() const { return lex_.complete(); }
  int closing_bytes() const;
  int64_t bytes() const { return lex_.bytes(); }
  const JsonGrammar& lexical() const { return lex_; }

 private:
  using Mode = JsonGrammar::Mode;
  enum class Tok : uint8_t { kNone, kKey, kValue };
  struct Frame {
    int16_t node = -1;  // -1: any value
    bool array = false;
    uint64_t seen = 0;  // objects: the properties written
    int32_t count = 0;  // arrays: the items started
  };

  bool step(uint8_t c);
  bool structural(Mode before, uint8_t c);
  bool value_start(uint8_t c);
  bool filter(uint8_t c);          // narrows the key or enum candidates by the next byte
  bool key_done();
  bool scalar_done() const;        // the value just ended: an allowed value is complete
  const SchemaNode* node(int i) const { return i < 0 ? nullptr : &schema_->node(i); }
  const std::string& candidate(int i) const;  // key or enum text i of the token in progress
  int candidates() const;
  int frame_rest(const Frame& f, uint64_t seen, bool has_member) const;  // bytes to close a frame from here
  bool call() const { return lex_.syntax() == Syntax::kCall; }
  const std::string& key_of(const SchemaNode::Property& p) const { return call() ? p.call_key : p.key; }
  const std::vector<std::string>& allowed_of(const SchemaNode& n) const { return call() ? n.call_allowed : n.allowed; }
  int value_min(int node) const {
    return node < 0 ? 1 : call() ? schema_->node(node).call_min_bytes : schema_->node(node).min_bytes;
  }
  bool additional(const SchemaNode* n) const { return n == nullptr || (n->additional && !listed_only_); }
  int token_rest() const;  // bytes to finish what is in progress and close the innermost frame

  JsonGrammar lex_;
  const JsonSchema* schema_;
  std::array<Frame, kMaxFrames> frames_{};
  int depth_ = 0;            // frames open
  int16_t pending_ = 0;      // the node of the next value (the root's first)
  Tok tok_ = Tok::kNone;
  bool listed_only_ = false;  // kKey: a call's key written as a string where the schema lists names
  int16_t tok_node_ = -1;    // kValue: the value's node; kKey: the object's node
  uint64_t cand_ = 0;        // candidates still matching the token's text
  int32_t pos_ = 0;          // bytes of the token so far
  int16_t int_digits_ = 0;   // a number's digits before the point, and in its exponent
  int16_t exp_digits_ = 0;
};

}  // namespace dg
