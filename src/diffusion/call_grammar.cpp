#include "diffusion/call_grammar.h"

#include <algorithm>
#include <climits>

#include "core/error.h"

namespace dg {
namespace {

// The arguments of a tool without a schema: any object, walked by SchemaGrammar all the same for its bounds on
// numbers (the call's parser refuses a number beyond a double's range).
const JsonSchema* any_object() {
  static const std::shared_ptr<const JsonSchema> s = JsonSchema::compile(SchemaJson{{"type", "object"}}, "arguments");
  return s.get();
}

}  // namespace

bool CallGrammar::callable(const std::string& name) {
  return !name.empty() && std::none_of(name.begin(), name.end(), [](char ch) {
    const auto c = static_cast<uint8_t>(ch);
    return c == '{' || c == '}' || c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == kQuoteByte ||
           c == kCloseByte;
  });
}

CallGrammar::CallGrammar(const std::vector<CallTool>* tools) : tools_(tools) {
  DG_CHECK(tools_ != nullptr && static_cast<int>(tools_->size()) <= kMaxTools,
           "a constrained tool call takes at most {} tools", kMaxTools);
  for (size_t i = 0; i < tools_->size(); ++i) {
    const CallTool& t = (*tools_)[i];
    if (t.schema != nullptr)
      DG_CHECK(t.schema->root_accepts_object(), "tool '{}': its parameters must accept an object (\"type\": "
                                                "\"object\") to constrain its calls", t.name);
    cand_.set(i, callable(t.name));
  }
  DG_CHECK(cand_.any(), "no declared tool has a name a tool call can hold (no whitespace, '{{', '}}' or ',')");
}

int CallGrammar::args_min(int tool) const {
  const CallTool& t = (*tools_)[static_cast<size_t>(tool)];
  return t.schema != nullptr ? t.schema->root_object_bytes(true) : 2;
}

bool CallGrammar::feed(uint8_t byte) {
  CallGrammar next = *this;
  if (!next.step(byte)) return false;
  ++next.bytes_;
  *this = next;
  return true;
}

bool CallGrammar::feed(std::string_view bytes) {
  CallGrammar next = *this;
  for (const char c : bytes)
    if (!next.feed(static_cast<uint8_t>(c))) return false;
  *this = next;
  return true;
}

bool CallGrammar::step(uint8_t c) {
  switch (part_) {
    case Part::kHead:
      if (c != static_cast<uint8_t>(kHead[static_cast<size_t>(pos_)])) return false;
      if (++pos_ == static_cast<int>(kHead.size())) {
        part_ = Part::kName;
        pos_ = 0;
      }
      return true;
    case Part::kName: {
      if (c == '{') {
        for (size_t i = 0; i < tools_->size(); ++i)
          if (cand_.test(i) && (*tools_)[i].name.size() == static_cast<size_t>(pos_)) {
            tool_ = static_cast<int>(i);
            const JsonSchema* s = (*tools_)[i].schema.get();
            args_ = SchemaGrammar(s != nullptr ? s : any_object(), Syntax::kCall);
            part_ = Part::kArgs;
            return args_.feed(c);
          }
        return false;
      }
      std::bitset<kMaxTools> keep;
      for (size_t i = 0; i < tools_->size(); ++i) {
        const std::string& n = (*tools_)[i].name;
        keep.set(i, cand_.test(i) && static_cast<size_t>(pos_) < n.size() &&
                        static_cast<uint8_t>(n[static_cast<size_t>(pos_)]) == c);
      }
      if (keep.none()) return false;
      cand_ = keep;
      ++pos_;
      return true;
    }
    case Part::kArgs:
      if (!args_.feed(c)) return false;
      if (args_.complete()) part_ = Part::kClose;
      return true;
    case Part::kClose:
      if (c != kCloseByte) return false;
      part_ = Part::kDone;
      return true;
    case Part::kDone:
      return false;
  }
  return false;
}

int CallGrammar::closing_bytes() const {
  switch (part_) {
    case Part::kHead:
    case Part::kName: {
      const int head = part_ == Part::kHead ? static_cast<int>(kHead.size()) - pos_ : 0;
      const int at = part_ == Part::kHead ? 0 : pos_;
      int best = INT_MAX;
      for (size_t i = 0; i < tools_->size(); ++i)
        if (cand_.test(i))
          best = std::min(best, static_cast<int>((*tools_)[i].name.size()) - at + args_min(static_cast<int>(i)) + 1);
      return head + best;
    }
    case Part::kArgs: return args_.closing_bytes() + 1;
    case Part::kClose: return 1;
    case Part::kDone: return 0;
  }
  return 0;
}

}  // namespace dg
