#include "chat/chat_tokens.h"

#include "core/error.h"

namespace dg {
namespace {

int32_t lookup(const Tokenizer& tok, const char* literal) {
  const auto id = tok.token_id(literal);
  DG_CHECK(id.has_value(), "the tokenizer has no '{}' token, so it is not a Gemma 4 chat tokenizer (use --raw)",
           literal);
  return *id;
}

}  // namespace

ChatTokens ChatTokens::from(const Tokenizer& tok) {
  ChatTokens t;
  t.bos = lookup(tok, "<bos>");
  t.eos = lookup(tok, "<eos>");
  t.turn_open = lookup(tok, "<|turn>");
  t.turn_close = lookup(tok, "<turn|>");
  t.channel_open = lookup(tok, "<|channel>");
  t.channel_close = lookup(tok, "<channel|>");
  t.think = lookup(tok, "<|think|>");
  t.tool_open = lookup(tok, "<|tool>");
  t.tool_close = lookup(tok, "<tool|>");
  t.call_open = lookup(tok, "<|tool_call>");
  t.call_close = lookup(tok, "<tool_call|>");
  t.response_open = lookup(tok, "<|tool_response>");
  t.response_close = lookup(tok, "<tool_response|>");
  t.quote = lookup(tok, "<|\"|>");
  return t;
}

bool ChatTokens::is_marker(int32_t id) const {
  for (int32_t m : {bos, eos, turn_open, turn_close, channel_open, channel_close, think, tool_open, tool_close,
                    call_open, call_close, response_open, response_close, quote})
    if (id == m) return true;
  return false;
}

}  // namespace dg
