// The Gemma 4 chat markers as token ids, looked up by their literal in the tokenizer (docs/CHAT.md lists them).
// Rendering inserts markers by id and parsing recognises them by id, so text can never stand in for a marker.
#pragma once

#include <cstdint>

#include "io/tokenizer.h"

namespace dg {

struct ChatTokens {
  int32_t bos = -1, eos = -1;
  int32_t turn_open = -1, turn_close = -1;        // <|turn> <turn|>
  int32_t channel_open = -1, channel_close = -1;  // <|channel> <channel|>
  int32_t think = -1;                             // <|think|>
  int32_t tool_open = -1, tool_close = -1;        // <|tool> <tool|>            (a declaration)
  int32_t call_open = -1, call_close = -1;        // <|tool_call> <tool_call|>  (a call)
  int32_t response_open = -1, response_close = -1;  // <|tool_response> <tool_response|>
  int32_t quote = -1;                             // <|"|>                      (string delimiter)

  // Throws dg::Error naming the first missing literal: the tokenizer is then not a Gemma 4 chat tokenizer.
  static ChatTokens from(const Tokenizer& tok);
  bool is_marker(int32_t id) const;  // one of the ids above
};

}  // namespace dg
