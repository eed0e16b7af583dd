// Shared by the chat tests: the embedded model's tokenizer (Gemma 4 specials at their real ids), its chat
// markers, readable id-vector comparison.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "chat/chat_tokens.h"
#include "io/tokenizer.h"
#include "support/paths.h"

namespace dg::test {

inline const Tokenizer& tiny_tokenizer() {
  static const Tokenizer tok = Tokenizer::load(source_path("models/dg-tiny/tokenizer.json"));
  return tok;
}
inline const ChatTokens& tiny_chat_tokens() {
  static const ChatTokens t = ChatTokens::from(tiny_tokenizer());
  return t;
}
inline std::vector<int32_t> plain(const std::string& s) { return tiny_tokenizer().encode(s, SpecialTokens::kPlain); }
// The parts' ids one after another.
inline std::vector<int32_t> ids(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// Equal id vectors, or a failure naming the first differing index with the text on both sides.
inline ::testing::AssertionResult same_ids(const std::vector<int32_t>& got, const std::vector<int32_t>& want) {
  if (got == want) return ::testing::AssertionSuccess();
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  const Tokenizer& tok = tiny_tokenizer();
  auto tail = [&](const std::vector<int32_t>& v) {
    const size_t b = i >= 8 ? i - 8 : 0;
    return tok.decode(std::vector<int32_t>(v.begin() + static_cast<long>(b),
                                           v.begin() + static_cast<long>(std::min(v.size(), i + 8))));
  };
  return ::testing::AssertionFailure() << "ids differ at index " << i << " (sizes " << got.size() << " vs "
                                       << want.size() << ")\n  got:  ..." << tail(got) << "...\n  want: ..."
                                       << tail(want) << "...";
}

}  // namespace dg::test
