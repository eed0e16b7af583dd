#include "diffusion/json_grammar.h"

#include "io/utf8_lead.h"

namespace dg {
namespace {

constexpr std::string_view kLiterals[] = {"true", "false", "null", "None"};  // None: Syntax::kCall only

bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

int hex_value(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool JsonGrammar::bare_key_byte(uint8_t c) {
  return c > 0x20 && c < 0x7F && std::string_view(":{}[],\"").find(static_cast<char>(c)) == std::string_view::npos;
}

bool JsonGrammar::feed(uint8_t byte) {
  const JsonGrammar saved = *this;
  const uint8_t run = ws_run_;
  if (!step(byte)) {
    *this = saved;
    return false;
  }
  if (ws_run_ == run) ws_run_ = 0;  // not structural whitespace: the run ends
  ++bytes_;
  return true;
}

bool JsonGrammar::feed(std::string_view bytes) {
  const JsonGrammar saved = *this;
  for (const char c : bytes)
    if (!feed(static_cast<uint8_t>(c))) {
      *this = saved;
      return false;
    }
  return true;
}

int JsonGrammar::closing_bytes() const {
  int value = 0;  // the bytes that end the value (or member) in progress
  switch (mode_) {
    case Mode::kDone: return 0;
    case Mode::kStart: return 2;
    case Mode::kKeyOrClose: case Mode::kValueOrClose: case Mode::kAfterValue:
    case Mode::kNumZero: case Mode::kNumInt: case Mode::kNumFrac: case Mode::kNumExpDigits: value = 0; break;
    case Mode::kKey: value = shortest_member(); break;
    case Mode::kColon: case Mode::kBareKey: value = 2; break;  // :0
    case Mode::kValue: case Mode::kNumMinus: case Mode::kNumDot: case Mode::kNumExp: case Mode::kNumExpSign:
      value = 1;
      break;
    case Mode::kLiteral: value = static_cast<int>(kLiterals[literal_].size()) - literal_at_; break;
    case Mode::kString: case Mode::kEscape: case Mode::kUnicode: case Mode::kSurrogateSlash: case Mode::kSurrogateU:
    case Mode::kUtf8: {
      int tail = 0;
      if (mode_ == Mode::kEscape) tail = 1;
      if (mode_ == Mode::kUnicode) {
        tail = hex_left_;
        const int at = 4 - hex_left_;  // a high surrogate in the making (\uD8..\uDB) must be followed by its pair
        if (!low_surrogate_ && at >= 2 && (unit_ >> (4 * (at - 2))) >= 0xD8 && (unit_ >> (4 * (at - 2))) <= 0xDB)
          tail += 6;
      }
      if (mode_ == Mode::kSurrogateSlash) tail = 6;
      if (mode_ == Mode::kSurrogateU) tail = 5;
      if (mode_ == Mode::kUtf8) tail = utf8_left_;
      value = tail + 1 + (key_ ? 2 : 0);  // the closing quote; a key then needs :0
      break;
    }
  }
  return value + depth_ + 1;
}

bool JsonGrammar::whitespace(uint8_t c) {
  if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return false;
  if (ws_run_ >= kMaxWhitespace) return false;
  ++ws_run_;
  return true;
}

bool JsonGrammar::open(char kind) {
  if (depth_ + 1 >= kMaxDepth) return false;
  ++depth_;
  const uint64_t bit = uint64_t{1} << depth_;
  stack_ = kind == '[' ? stack_ | bit : stack_ & ~bit;
  mode_ = kind == '[' ? Mode::kValueOrClose : Mode::kKeyOrClose;
  return true;
}

bool JsonGrammar::close(char kind) {
  if (depth_ < 0 || top() != kind) return false;
  --depth_;
  mode_ = depth_ < 0 ? Mode::kDone : Mode::kAfterValue;
  return true;
}

bool JsonGrammar::value_start(uint8_t c) {
  if (c == quote()) {
    key_ = false;
    mode_ = Mode::kString;
    return true;
  }
  switch (c) {
    case '{': return open('{');
    case '[': return open('[');
    case '-': mode_ = Mode::kNumMinus; return true;
    case '0': mode_ = Mode::kNumZero; return true;
    case 't': case 'f': case 'n': case 'N':
      if (c == 'N' && !call_) return false;
      literal_ = c == 't' ? 0 : c == 'f' ? 1 : c == 'n' ? 2 : 3;
      literal_at_ = 1;
      mode_ = Mode::kLiteral;
      return true;
    default:
      if (c < '1' || c > '9') return false;
      mode_ = Mode::kNumInt;
      return true;
  }
}

bool JsonGrammar::step(uint8_t c) {
  switch (mode_) {
    case Mode::kStart:
      return c == '{' && open('{');
    case Mode::kKeyOrClose:
      if (c == '}') return close('{');
      [[fallthrough]];
    case Mode::kKey:
      if (whitespace(c)) return true;
      if (c != quote() && !(call_ && bare_key_byte(c))) return false;
      key_ = true;
      mode_ = c == quote() ? Mode::kString : Mode::kBareKey;
      return true;
    case Mode::kBareKey:
      if (c == ':') {
        mode_ = Mode::kValue;
        return true;
      }
      return bare_key_byte(c);
    case Mode::kColon:
      if (whitespace(c)) return true;
      if (c != ':') return false;
      mode_ = Mode::kValue;
      return true;
    case Mode::kValueOrClose:
      if (c == ']') return close('[');
      [[fallthrough]];
    case Mode::kValue:
      return whitespace(c) || value_start(c);
    case Mode::kAfterValue:
      if (whitespace(c)) return true;
      if (c == ',') {
        mode_ = top() == '{' ? Mode::kKey : Mode::kValue;
        return true;
      }
      return (c == '}' || c == ']') && close(static_cast<char>(c == '}' ? '{' : '['));
    case Mode::kString:
      if (c == quote()) {
        mode_ = key_ ? Mode::kColon : Mode::kAfterValue;
        return true;
      }
      if (c == '\\' && !call_) {
        mode_ = Mode::kEscape;
        return true;
      }
      if (c < 0x20 && !call_) return false;  // raw control characters must be escaped (a call's strings are raw)
      if (c < 0x80) return true;
      if (const std::optional<Utf8Lead> lead = utf8_lead(c)) {
        utf8_left_ = static_cast<uint8_t>(lead->len - 1);
        utf8_lo_ = lead->lo;
        utf8_hi_ = lead->hi;
      } else {
        return false;
      }
      mode_ = Mode::kUtf8;
      return true;
    case Mode::kUtf8:
      if (c < utf8_lo_ || c > utf8_hi_) return false;
      utf8_lo_ = 0x80;
      utf8_hi_ = 0xBF;
      if (--utf8_left_ == 0) mode_ = Mode::kString;
      return true;
    case Mode::kEscape:
      if (c == 'u') {
        hex_left_ = 4;
        unit_ = 0;
        mode_ = Mode::kUnicode;
        return true;
      }
      if (std::string_view("\"\\/bfnrt").find(static_cast<char>(c)) == std::string_view::npos) return false;
      mode_ = Mode::kString;
      return true;
    case Mode::kUnicode: {
      const int d = hex_value(c);
      if (d < 0) return false;
      const int at = 4 - hex_left_;
      if (low_surrogate_ && ((at == 0 && d != 0xD) || (at == 1 && d < 0xC))) return false;  // \uDC00-\uDFFF due
      if (!low_surrogate_ && at == 1 && unit_ == 0xD && d >= 0xC) return false;  // a low surrogate alone
      unit_ = static_cast<uint16_t>(unit_ << 4 | d);
      if (--hex_left_ > 0) return true;
      const bool high = !low_surrogate_ && unit_ >= 0xD800 && unit_ <= 0xDBFF;
      low_surrogate_ = false;
      mode_ = high ? Mode::kSurrogateSlash : Mode::kString;
      return true;
    }
    case Mode::kSurrogateSlash:
      if (c != '\\') return false;
      mode_ = Mode::kSurrogateU;
      return true;
    case Mode::kSurrogateU:
      if (c != 'u') return false;
      low_surrogate_ = true;
      hex_left_ = 4;
      unit_ = 0;
      mode_ = Mode::kUnicode;
      return true;
    case Mode::kLiteral: {
      const std::string_view lit = kLiterals[literal_];
      if (c != static_cast<uint8_t>(lit[literal_at_])) return false;
      if (++literal_at_ == lit.size()) mode_ = Mode::kAfterValue;
      return true;
    }
    case Mode::kNumMinus:
      if (!is_digit(c)) return false;
      mode_ = c == '0' ? Mode::kNumZero : Mode::kNumInt;
      return true;
    case Mode::kNumZero:
    case Mode::kNumInt:
    case Mode::kNumFrac:
      if (is_digit(c) && mode_ != Mode::kNumZero) return true;
      if (c == '.' && mode_ != Mode::kNumFrac) {
        mode_ = Mode::kNumDot;
        return true;
      }
      if (c == 'e' || c == 'E') {
        mode_ = Mode::kNumExp;
        return true;
      }
      mode_ = Mode::kAfterValue;  // the number ended: the byte belongs to what follows it
      return step(c);
    case Mode::kNumDot:
      if (!is_digit(c)) return false;
      mode_ = Mode::kNumFrac;
      return true;
    case Mode::kNumExp:
      if (c == '+' || c == '-') {
        mode_ = Mode::kNumExpSign;
        return true;
      }
      [[fallthrough]];
    case Mode::kNumExpSign:
      if (!is_digit(c)) return false;
      mode_ = Mode::kNumExpDigits;
      return true;
    case Mode::kNumExpDigits:
      if (is_digit(c)) return true;
      mode_ = Mode::kAfterValue;
      return step(c);
    case Mode::kDone:
      return whitespace(c);
  }
  return false;
}

}  // namespace dg
