#include "diffusion/json_schema_grammar.h"

#include <algorithm>
#include <bit>
#include <climits>

namespace dg {
namespace {

using Mode = JsonGrammar::Mode;

bool in_string(Mode m) {
  return m == Mode::kString || m == Mode::kEscape || m == Mode::kUnicode || m == Mode::kSurrogateSlash ||
         m == Mode::kSurrogateU || m == Mode::kUtf8;
}
bool in_number(Mode m) { return m >= Mode::kNumMinus && m <= Mode::kNumExpDigits; }
bool number_complete(Mode m) {
  return m == Mode::kNumZero || m == Mode::kNumInt || m == Mode::kNumFrac || m == Mode::kNumExpDigits;
}
bool whitespace(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
uint64_t first_bits(size_t n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; }

}  // namespace

bool SchemaGrammar::feed(uint8_t byte) {
  if (schema_ == nullptr) return lex_.feed(byte);
  SchemaGrammar next = *this;
  if (!next.step(byte)) return false;
  *this = next;
  return true;
}

bool SchemaGrammar::feed(std::string_view bytes) {
  SchemaGrammar next = *this;
  for (const char c : bytes)
    if (!next.feed(static_cast<uint8_t>(c))) return false;
  *this = next;
  return true;
}

const std::string& SchemaGrammar::candidate(int i) const {
  const SchemaNode& n = schema_->node(tok_node_);
  return tok_ == Tok::kKey ? key_of(n.properties[static_cast<size_t>(i)]) : allowed_of(n)[static_cast<size_t>(i)];
}

int SchemaGrammar::candidates() const {
  const SchemaNode* n = node(tok_node_);
  if (n == nullptr) return 0;
  return static_cast<int>(tok_ == Tok::kKey ? n->properties.size() : allowed_of(*n).size());
}

bool SchemaGrammar::filter(uint8_t c) {
  const int total = candidates();
  if (total > 0) {
    uint64_t keep = 0;
    for (uint64_t m = cand_; m != 0; m &= m - 1) {
      const int i = std::countr_zero(m);
      const std::string& s = candidate(i);
      if (static_cast<size_t>(pos_) < s.size() && static_cast<uint8_t>(s[static_cast<size_t>(pos_)]) == c)
        keep |= uint64_t{1} << i;
    }
    cand_ = keep;
  }
  ++pos_;
  if (tok_ == Tok::kValue) return total == 0 || cand_ != 0;
  const SchemaNode* n = node(tok_node_);
  return additional(n) || (cand_ & ~frames_[static_cast<size_t>(depth_ - 1)].seen) != 0;
}

bool SchemaGrammar::key_done() {
  const SchemaNode* n = node(tok_node_);
  Frame& f = frames_[static_cast<size_t>(depth_ - 1)];
  tok_ = Tok::kNone;
  pending_ = -1;
  if (n == nullptr) return true;
  for (uint64_t m = cand_; m != 0; m &= m - 1) {
    const int i = std::countr_zero(m);
    if (key_of(n->properties[static_cast<size_t>(i)]).size() != static_cast<size_t>(pos_)) continue;
    if ((f.seen >> i & 1) != 0) return false;  // a property twice
    f.seen |= uint64_t{1} << i;
    pending_ = static_cast<int16_t>(n->properties[static_cast<size_t>(i)].node);
    return true;
  }
  return additional(n);
}

bool SchemaGrammar::scalar_done() const {
  const SchemaNode* n = node(tok_node_);
  if (n == nullptr || n->allowed.empty()) return true;
  for (uint64_t m = cand_; m != 0; m &= m - 1)
    if (allowed_of(*n)[static_cast<size_t>(std::countr_zero(m))].size() == static_cast<size_t>(pos_)) return true;
  return false;
}

bool SchemaGrammar::value_start(uint8_t c) {
  int nd = pending_;
  if (depth_ > 0 && frames_[static_cast<size_t>(depth_ - 1)].array) {
    Frame& f = frames_[static_cast<size_t>(depth_ - 1)];
    const SchemaNode* a = node(f.node);
    if (a != nullptr && a->max_items >= 0 && f.count >= a->max_items) return false;
    ++f.count;
    nd = a != nullptr ? a->items : -1;
  }
  const SchemaNode* n = node(nd);
  const uint8_t need = c == '{'                ? SchemaNode::kObject
                       : c == '['              ? SchemaNode::kArray
                       : c == lex_.quote()     ? SchemaNode::kString
                       : c == 't' || c == 'f'  ? SchemaNode::kBoolean
                       : c == 'n' || c == 'N'  ? SchemaNode::kNull
                                               : SchemaNode::kInteger | SchemaNode::kNumber;
  if (n != nullptr && (n->types & need) == 0) return false;
  if (c == '{' || c == '[') {
    if ((n != nullptr && !n->allowed.empty()) || depth_ >= kMaxFrames) return false;
    frames_[static_cast<size_t>(depth_++)] = Frame{static_cast<int16_t>(nd), c == '[', 0, 0};
    pending_ = -1;
    return true;
  }
  tok_ = Tok::kValue;
  tok_node_ = static_cast<int16_t>(nd);
  pos_ = 0;
  int_digits_ = c >= '0' && c <= '9' ? 1 : 0;
  exp_digits_ = 0;
  cand_ = n != nullptr ? first_bits(n->allowed.size()) : 0;
  return filter(c);
}

bool SchemaGrammar::structural(Mode before, uint8_t c) {
  if (whitespace(c)) return true;
  if (before == Mode::kStart || before == Mode::kValue || (before == Mode::kValueOrClose && c != ']'))
    return value_start(c);
  if ((before == Mode::kKeyOrClose || before == Mode::kKey) &&
      (lex_.mode() == Mode::kString || lex_.mode() == Mode::kBareKey)) {  // a key starts
    const Frame& f = frames_[static_cast<size_t>(depth_ - 1)];
    tok_ = Tok::kKey;
    tok_node_ = f.node;
    pos_ = 0;
    const SchemaNode* n = node(f.node);
    // A call's key written as a string where the schema lists names must be one of them: its text could spell a
    // listed name that is written bare.
    listed_only_ = call() && lex_.mode() == Mode::kString && n != nullptr && !n->properties.empty();
    cand_ = n != nullptr ? first_bits(n->properties.size()) : 0;
    return filter(c);
  }
  if (c == '}' || c == ']') {
    const Frame& f = frames_[static_cast<size_t>(depth_ - 1)];
    const SchemaNode* n = node(f.node);
    if (n != nullptr && c == '}' && (n->required & ~f.seen) != 0) return false;
    if (n != nullptr && c == ']' && f.count < n->min_items) return false;
    --depth_;
    return true;
  }
  if (c == ',') {
    const Frame& f = frames_[static_cast<size_t>(depth_ - 1)];
    const SchemaNode* n = node(f.node);
    if (n == nullptr) return true;
    if (f.array) return n->max_items < 0 || f.count < n->max_items;
    return n->additional || (first_bits(n->properties.size()) & ~f.seen) != 0;  // a bare key may be any name
  }
  return true;  // ':'
}

bool SchemaGrammar::step(uint8_t c) {
  const Mode before = lex_.mode();
  if (!lex_.feed(c)) return false;
  const Mode after = lex_.mode();
  if (tok_ == Tok::kKey) {
    if (before == Mode::kBareKey && after == Mode::kValue) return key_done();  // ':' ended a bare key
    if (!filter(c)) return false;
    return after == Mode::kColon ? key_done() : true;
  }
  if (tok_ == Tok::kValue) {
    if (in_number(before) && !in_number(after)) {  // the number ended before this byte, which follows it
      if (!scalar_done()) return false;
      tok_ = Tok::kNone;
      return structural(Mode::kAfterValue, c);
    }
    if (in_number(after) && c >= '0' && c <= '9') {
      if (after == Mode::kNumExpDigits && ++exp_digits_ > kMaxExpDigits) return false;
      if (after == Mode::kNumInt && ++int_digits_ > kMaxIntDigits) return false;
    }
    const SchemaNode* n = node(tok_node_);
    if (in_number(before) && n != nullptr && (c == '.' || c == 'e' || c == 'E') &&
        (n->types & SchemaNode::kNumber) == 0)
      return false;  // an integer
    if (!filter(c)) return false;
    if (after == Mode::kAfterValue || after == Mode::kDone) {  // a string or literal closed with this byte
      if (!scalar_done()) return false;
      tok_ = Tok::kNone;
    }
    return true;
  }
  return structural(before, c);
}

int SchemaGrammar::frame_rest(const Frame& f, uint64_t seen, bool has_member) const {
  const SchemaNode* n = node(f.node);
  if (n == nullptr) return 1;
  int missing = 0, bytes = 0;
  if (f.array) {
    missing = std::max(0, n->min_items - f.count);
    bytes = missing * value_min(n->items);
  } else {
    for (uint64_t m = n->required & ~seen; m != 0; m &= m - 1) {
      const SchemaNode::Property& p = n->properties[static_cast<size_t>(std::countr_zero(m))];
      bytes += static_cast<int>(key_of(p).size()) + 1 + value_min(p.node);
      ++missing;
    }
  }
  return bytes + (has_member ? missing : std::max(0, missing - 1)) + 1;
}

int SchemaGrammar::token_rest() const {
  const Frame& f = frames_[static_cast<size_t>(depth_ - 1)];
  const SchemaNode* fn = node(f.node);
  const Mode m = lex_.mode();
  // The string's tail and its closing quote (0 in a bare key, which ':' ends).
  const int str_tail = lex_.closing_bytes() - lex_.depth() - (lex_.in_key() ? 2 : 0);
  if (tok_ == Tok::kKey) {
    const bool bare = m == Mode::kBareKey;
    int best = INT_MAX;
    bool exact = false;  // ending the key now would spell a listed name
    if (fn != nullptr)
      for (uint64_t c = cand_; c != 0; c &= c - 1) {
        const int i = std::countr_zero(c);
        const SchemaNode::Property& p = fn->properties[static_cast<size_t>(i)];
        exact = exact || key_of(p).size() == static_cast<size_t>(pos_) + (bare ? 0 : 1);
        if ((f.seen >> i & 1) != 0) continue;
        const int rest = static_cast<int>(key_of(p).size()) - pos_ + 1 + value_min(p.node) +
                         frame_rest(f, f.seen | uint64_t{1} << i, true);
        best = std::min(best, rest);
      }
    // A name the schema does not list: end it now, or when that would spell a listed name, one byte later (a byte
    // no listed name continues with).
    if (additional(fn))
      best = std::min(best, str_tail + 2 + (exact && (bare || m == Mode::kString) ? 1 : 0) +
                                frame_rest(f, f.seen, true));
    return best;
  }
  if (tok_ == Tok::kValue) {
    const SchemaNode* n = node(tok_node_);
    int rest = 0;
    if (n != nullptr && !n->allowed.empty()) {
      rest = INT_MAX;
      for (uint64_t c = cand_; c != 0; c &= c - 1)
        rest = std::min(rest, static_cast<int>(allowed_of(*n)[static_cast<size_t>(std::countr_zero(c))].size()) - pos_);
    } else if (in_string(m)) {
      rest = str_tail;
    } else if (in_number(m)) {
      rest = number_complete(m) ? 0 : 1;
    } else {
      rest = lex_.closing_bytes() - lex_.depth();  // a literal's tail
    }
    return rest + frame_rest(f, f.seen, true);
  }
  switch (m) {
    case Mode::kKeyOrClose: return frame_rest(f, f.seen, false);
    case Mode::kKey: {  // after ',': a member must follow
      if (fn != nullptr && (fn->required & ~f.seen) != 0) return frame_rest(f, f.seen, false);
      int best = fn == nullptr || fn->additional ? lex_.shortest_member() : INT_MAX;
      if (fn != nullptr)
        for (size_t i = 0; i < fn->properties.size(); ++i)
          if ((f.seen >> i & 1) == 0)
            best = std::min(best, static_cast<int>(key_of(fn->properties[i]).size()) + 1 +
                                      value_min(fn->properties[i].node));
      return best + 1;
    }
    case Mode::kColon: return 1 + value_min(pending_) + frame_rest(f, f.seen, true);
    case Mode::kValue:
      if (f.array) {
        Frame next = f;
        ++next.count;
        return value_min(fn != nullptr ? fn->items : -1) + frame_rest(next, next.seen, true);
      }
      return value_min(pending_) + frame_rest(f, f.seen, true);
    case Mode::kValueOrClose: return frame_rest(f, f.seen, false);
    default: return frame_rest(f, f.seen, true);  // kAfterValue
  }
}

int SchemaGrammar::closing_bytes() const {
  if (schema_ == nullptr) return lex_.closing_bytes();
  if (lex_.complete()) return 0;
  if (lex_.mode() == Mode::kStart) return schema_->root_object_bytes(call());
  int d = token_rest();
  for (int k = depth_ - 2; k >= 0; --k) {
    const Frame& f = frames_[static_cast<size_t>(k)];
    d += frame_rest(f, f.seen, true);
  }
  return d;
}

}  // namespace dg
