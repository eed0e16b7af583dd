// JsonGrammar: a byte-level incremental validator of one JSON object (RFC 8259), the grammar behind JSON mode
// (response_format json_object, src/diffusion/json_commit.h). Its state after a byte prefix says whether the prefix
// can still become one complete JSON object; complete() says one has closed. The text must start with '{' (no
// leading whitespace), strings must be valid UTF-8 (RFC 3629) without raw control bytes, \u escapes must pair
// surrogates, nesting stops at kMaxDepth and whitespace runs at kMaxWhitespace (bounds on a runaway model, not
// JSON rules). Trivially copyable, so trying a candidate token costs one copy.
// Syntax::kCall is the same walk over the arguments of a Gemma 4 tool call (docs/CHAT.md, chat/tools_parse.h):
// strings open and close with the <|"|> token (kQuoteByte in the byte text) and hold any UTF-8 but it, without
// escapes; keys are bare (printable ASCII but whitespace and :{}[],") or strings; null may be written None.
#pragma once

#include <cstdint>
#include <string_view>

namespace dg {

// The text a grammar walks: JSON, or the arguments of a Gemma 4 tool call.
enum class Syntax : uint8_t { kJson, kCall };

// In the byte text of a tool call, the control tokens it holds stand as bytes that UTF-8 never uses.
inline constexpr uint8_t kQuoteByte = 0xFF;  // <|"|>, a string's delimiter
inline constexpr uint8_t kCloseByte = 0xFE;  // <tool_call|>, the end of the call (call_grammar.h)

class JsonGrammar {
 public:
  static constexpr int kMaxDepth = 64;
  static constexpr int kMaxWhitespace = 64;
  // Where the text stands: what the next byte may be (a schema on top reads it, json_schema_grammar.h).
  enum class Mode : uint8_t {
    kStart, kKeyOrClose, kKey, kColon, kValue, kValueOrClose, kAfterValue,
    kString, kEscape, kUnicode, kSurrogateSlash, kSurrogateU, kUtf8, kLiteral,
    kNumMinus, kNumZero, kNumInt, kNumDot, kNumFrac, kNumExp, kNumExpSign, kNumExpDigits, kDone,
    kBareKey,  // Syntax::kCall: a bare key, ended by ':'
  };
  explicit JsonGrammar(Syntax syntax = Syntax::kJson) : call_(syntax == Syntax::kCall) {}
  Syntax syntax() const { return call_ ? Syntax::kCall : Syntax::kJson; }
  uint8_t quote() const { return call_ ? kQuoteByte : '"'; }  // the byte that opens and closes a string
  static bool bare_key_byte(uint8_t c);  // a byte a bare key may hold
  Mode mode() const { return mode_; }
  bool in_key() const { return key_; }  // the string (or bare key) in progress is an object key
  int depth() const { return depth_ + 1; }  // containers open

  // Feeds one byte; false (and the state unchanged) when it cannot continue a valid prefix.
  bool feed(uint8_t byte);
  // Feeds every byte; false (and the state unchanged) when any cannot.
  bool feed(std::string_view bytes);
  // Whether `bytes` would be accepted, without changing the state.
  bool accepts(std::string_view bytes) const {
    JsonGrammar g = *this;
    return g.feed(bytes);
  }
  bool complete() const { return mode_ == Mode::kDone; }  // the top-level object has closed
  // The fewest bytes that complete the object from here (0 once complete): what is open closes, a key still
  // without a value gets 0, an escape gets its shortest tail (a high surrogate also its 6-byte pair).
  int closing_bytes() const;
  int64_t bytes() const { return bytes_; }                // bytes accepted so far
  // The fewest bytes of a member that no schema lists: "":0 in JSON, a:0 in a call.
  int shortest_member() const { return call_ ? 3 : 4; }

 private:
  bool step(uint8_t c);  // the transition; may leave the state partly changed when it returns false
  bool open(char kind);  // pushes a container ('{' or '[')
  bool close(char kind);
  bool value_start(uint8_t c);
  bool whitespace(uint8_t c);
  char top() const { return (stack_ >> depth_ & 1) != 0 ? '[' : '{'; }

  Mode mode_ = Mode::kStart;
  bool call_ = false;          // Syntax::kCall
  bool key_ = false;           // the string in progress is an object key
  bool low_surrogate_ = false;  // the \u escape in progress must be a low surrogate
  uint8_t hex_left_ = 0;       // \u: hex digits still due
  uint16_t unit_ = 0;          // \u: the code unit so far
  uint8_t utf8_left_ = 0;      // continuation bytes still due
  uint8_t utf8_lo_ = 0x80, utf8_hi_ = 0xBF;  // the allowed range of the next continuation byte
  uint8_t literal_ = 0;        // kLiteral: which of true / false / null / None
  uint8_t literal_at_ = 0;     // kLiteral: bytes of it matched
  uint8_t ws_run_ = 0;
  int depth_ = -1;             // index of the innermost open container
  uint64_t stack_ = 0;         // bit i: container i is an array
  int64_t bytes_ = 0;
};

}  // namespace dg
