// IdWriter: builds a prompt as token ids. Text is encoded with special-token literals left as text (a client's
// "<|turn>" stays seven characters); markers are appended by id. Adjacent text is encoded as one piece, exactly as
// the reference tokenizes a rendered template (added tokens cut the text, the rest is one BPE run).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_tokens.h"
#include "io/tokenizer.h"

namespace dg {

class IdWriter {
 public:
  IdWriter(const Tokenizer& tok, const ChatTokens& t) : tok_(tok), t_(t) {}

  void text(std::string_view s) { pending_.append(s); }
  void marker(int32_t id);
  void quoted(std::string_view s);  // <|"|>s<|"|>

  const ChatTokens& tokens() const { return t_; }
  std::vector<int32_t> take();  // the ids so far; the writer starts over

 private:
  void flush();
  const Tokenizer& tok_;
  const ChatTokens& t_;
  std::string pending_;
  std::vector<int32_t> ids_;
};

}  // namespace dg
