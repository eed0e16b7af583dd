// Text helpers of the tokenizer: UTF-8 checks, the Unicode classes the added-token options need, the
// leftmost-longest literal matcher, and the normalizer / pre-tokenizer steps (HF NormalizedString::replace,
// ::prepend and ::split with SplitDelimiterBehavior).
#include <algorithm>
#include <utility>

#include "core/error.h"
#include "io/tokenizer_impl.h"
#include "io/utf8_lead.h"

namespace dg::tok {

// ---- UTF-8 -------------------------------------------------------------------------------------------------

size_t utf8_char_len(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

uint32_t utf8_decode_at(std::string_view s, size_t i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  const size_t len = utf8_char_len(b0);
  if (len == 1) return b0;
  uint32_t cp = b0 & (0xFF >> (len + 1));
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  return cp;
}

bool is_unicode_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

namespace {

// Non-ASCII ranges that are punctuation, symbols, separators or private use (not `\w`); a hand-made
// table covering the common blocks, sorted by start.
constexpr std::pair<uint32_t, uint32_t> kNonWord[] = {
    {0x00A0, 0x00A9},   {0x00AB, 0x00B4},   {0x00B6, 0x00B9},   {0x00BB, 0x00BF},   {0x00D7, 0x00D7},
    {0x00F7, 0x00F7},   {0x02C2, 0x02C5},   {0x02D2, 0x02DF},   {0x02E5, 0x02EB},   {0x02ED, 0x02ED},
    {0x02EF, 0x02FF},   {0x0375, 0x0375},   {0x037E, 0x037E},   {0x0384, 0x0385},   {0x0387, 0x0387},
    {0x03F6, 0x03F6},   {0x0482, 0x0482},   {0x055A, 0x055F},   {0x0589, 0x058A},   {0x05BE, 0x05BE},
    {0x05C0, 0x05C0},   {0x05C3, 0x05C3},   {0x05C6, 0x05C6},   {0x05F3, 0x05F4},   {0x0606, 0x060F},
    {0x061B, 0x061B},   {0x061D, 0x061F},   {0x066A, 0x066D},   {0x06D4, 0x06D4},   {0x0964, 0x0965},
    {0x0970, 0x0970},   {0x0E3F, 0x0E3F},   {0x0E4F, 0x0E4F},   {0x0E5A, 0x0E5B},   {0x10FB, 0x10FB},
    {0x1360, 0x1368},   {0x1680, 0x1680},   {0x2000, 0x200B},   {0x200E, 0x203E},   {0x2041, 0x2053},
    {0x2055, 0x206F},   {0x207A, 0x207E},   {0x208A, 0x208E},   {0x20A0, 0x20CF},   {0x2150, 0x215F},
    {0x2189, 0x24B5},   {0x24EA, 0x2BFF},   {0x2E00, 0x2E7F},   {0x2FF0, 0x3004},   {0x3008, 0x3020},
    {0x3030, 0x3030},   {0x3036, 0x3037},   {0x303D, 0x303F},   {0x309B, 0x309C},   {0x30A0, 0x30A0},
    {0x30FB, 0x30FB},   {0x3200, 0x33FF},   {0xD800, 0xF8FF},   {0xFD3E, 0xFD3F},   {0xFE10, 0xFE1F},
    {0xFE30, 0xFE32},   {0xFE35, 0xFE4C},   {0xFE50, 0xFE6F},   {0xFF00, 0xFF0F},   {0xFF1A, 0xFF20},
    {0xFF3B, 0xFF3E},   {0xFF40, 0xFF40},   {0xFF5B, 0xFF65},   {0xFFE0, 0xFFFF},   {0x1F000, 0x1FBFF},
    {0xE0000, 0xE007F}, {0xF0000, 0x10FFFF},
};

}  // namespace

bool is_word_char(uint32_t cp) {
  if (cp < 0x80) {
    return (cp >= '0' && cp <= '9') || (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z') || cp == '_';
  }
  if (cp == 0x200C || cp == 0x200D) return true;  // Join_Control
  const auto* it = std::upper_bound(std::begin(kNonWord), std::end(kNonWord), cp,
                                    [](uint32_t v, const std::pair<uint32_t, uint32_t>& r) { return v < r.first; });
  if (it == std::begin(kNonWord)) return true;
  --it;
  return cp > it->second;
}

// ---- LiteralTrie -------------------------------------------------------------------------------------------

int32_t LiteralTrie::child(int32_t node, uint8_t byte) const {
  if (node == 0) return root_[byte];
  const auto it = edges_.find((static_cast<uint64_t>(node) << 8) | byte);
  return it == edges_.end() ? 0 : it->second;
}

void LiteralTrie::add(std::string_view pattern, int32_t value) {
  if (pattern.empty()) return;
  int32_t node = 0;
  for (const char ch : pattern) {
    const auto byte = static_cast<uint8_t>(ch);
    int32_t next = child(node, byte);
    if (next == 0) {
      next = static_cast<int32_t>(value_.size());
      value_.push_back(-1);
      if (node == 0) {
        root_[byte] = next;
      } else {
        edges_.emplace((static_cast<uint64_t>(node) << 8) | byte, next);
      }
    }
    node = next;
  }
  if (value_[node] < 0) ++n_patterns_;
  value_[node] = value;  // a repeated pattern keeps the last value
}

std::vector<LiteralTrie::Match> LiteralTrie::find_all(std::string_view text) const {
  std::vector<Match> out;
  if (n_patterns_ == 0) return out;
  size_t i = 0;
  while (i < text.size()) {
    int32_t node = 0;
    size_t best_end = 0;
    int32_t best_value = -1;
    for (size_t j = i; j < text.size(); ++j) {
      node = child(node, static_cast<uint8_t>(text[j]));
      if (node == 0) break;
      if (value_[node] >= 0) {
        best_end = j + 1;
        best_value = value_[node];
      }
    }
    if (best_value >= 0) {
      out.push_back({i, best_end, best_value});
      i = best_end;
    } else {
      ++i;
    }
  }
  return out;
}

// ---- normalizer --------------------------------------------------------------------------------------------

std::string normalize(const std::vector<NormalizerStep>& steps, std::string text) {
  for (const auto& step : steps) {
    switch (step.kind) {
      case NormalizerStep::Kind::kReplace:
        text = replace_all(text, step.pattern, step.content);
        break;
      case NormalizerStep::Kind::kPrepend:
        if (!text.empty()) text.insert(0, step.content);  // HF prepends only to a non-empty string
        break;
    }
  }
  return text;
}

// ---- pre-tokenizer -----------------------------------------------------------------------------------------

namespace {

struct Span {
  size_t begin, end;
  bool is_match;
};

// HF Pattern::find_matches for a literal: contiguous spans covering the text, matches flagged.
std::vector<Span> literal_spans(std::string_view text, std::string_view pattern) {
  std::vector<Span> spans;
  if (text.empty()) return {{0, 0, false}};
  size_t prev = 0;
  size_t pos = text.find(pattern);
  while (pos != std::string_view::npos) {
    if (prev != pos) spans.push_back({prev, pos, false});
    spans.push_back({pos, pos + pattern.size(), true});
    prev = pos + pattern.size();
    pos = text.find(pattern, prev);
  }
  if (prev != text.size()) spans.push_back({prev, text.size(), false});
  return spans;
}

// HF NormalizedString::split: spans -> kept pieces, by delimiter behavior.
std::vector<std::pair<size_t, size_t>> apply_behavior(const std::vector<Span>& spans, SplitBehavior behavior) {
  std::vector<std::pair<size_t, size_t>> out;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const auto& s : spans) {
        if (!s.is_match) out.emplace_back(s.begin, s.end);
      }
      break;
    case SplitBehavior::kIsolated:
      for (const auto& s : spans) out.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::kContiguous:
      for (const auto& s : spans) {
        if (s.is_match == previous_match && !out.empty()) {
          out.back().second = s.end;
        } else {
          out.emplace_back(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const auto& s : spans) {
        if (s.is_match && !previous_match && !out.empty()) {
          out.back().second = s.end;
        } else {
          out.emplace_back(s.begin, s.end);
        }
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty()) {
          out.back().first = it->begin;
        } else {
          out.emplace_back(it->begin, it->end);
        }
        previous_match = it->is_match;
      }
      std::reverse(out.begin(), out.end());
      break;
  }
  return out;
}

}  // namespace

std::vector<std::string> pre_tokenize(const std::vector<SplitStep>& steps, std::string text) {
  std::vector<std::string> words;
  if (!text.empty()) words.push_back(std::move(text));
  for (const auto& step : steps) {
    std::vector<std::string> next;
    for (const auto& word : words) {
      auto spans = literal_spans(word, step.pattern);
      if (step.invert) {
        for (auto& s : spans) s.is_match = !s.is_match;
      }
      for (const auto& [b, e] : apply_behavior(spans, step.behavior)) {
        if (e > b) next.emplace_back(word.substr(b, e - b));  // empty splits are dropped
      }
    }
    words = std::move(next);
  }
  return words;
}

}  // namespace dg::tok
