// Parses the body of one Gemma 4 tool call, the ids between <|tool_call> and <tool_call|>:
//   call:NAME{key:value,…}   values: <|"|>string<|"|> | number | true | false | null/None | {…} | […]
// Keys are bare (or quoted); strings are delimited by the <|"|> token, so they may hold any text. Anything else is
// reported with the byte offset of the fault; parsing never throws and never recurses past kMaxDepth.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "chat/chat_tokens.h"
#include "chat/conversation.h"
#include "io/tokenizer.h"

namespace dg {

struct CallParse {
  bool ok = false;
  ToolCall call;      // name and arguments when ok
  std::string error;  // why not, when !ok
};

inline constexpr int kMaxCallDepth = 64;

CallParse parse_call(std::span<const int32_t> body, const Tokenizer& tok, const ChatTokens& t);

}  // namespace dg
