// ReplyStream: the model's committed tokens in, the reply out, incrementally. It splits the thought channel
// (reasoning) from the answer (content), cuts tool calls out and parses them, and stops at the first stop token.
// Text deltas are append-only: never half a UTF-8 character (bytes wait for their character), never a marker
// (markers are whole tokens, recognised by id and never printed), leading whitespace dropped and trailing
// whitespace held until more text follows. The concatenation of the deltas is the final Reply's text.
// parse_reply() is the same machine run over a whole output.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "chat/chat_tokens.h"
#include "chat/conversation.h"
#include "io/tokenizer.h"

namespace dg {

struct ToolCallError {
  std::string raw;      // the call's text as the model wrote it, markers included ("<|tool_call>call:f{a:")
  std::string message;  // what is wrong ("truncated", "expected ':' after key 'a' at byte 9", ...)
};

struct Reply {
  std::string reasoning, content;
  std::vector<ToolCall> tool_calls;  // ids are left empty: the caller numbers them
  std::vector<ToolCallError> errors;
  int32_t stop_token = -1;  // the token that ended the reply; -1 when the output ran out first
};

struct ReplyEvent {
  enum class Kind : uint8_t { kContent, kReasoning, kToolCall, kToolError };
  Kind kind = Kind::kContent;
  std::string text;  // kContent / kReasoning: the delta
  ToolCall call;
  ToolCallError error;
};

class ReplyStream {
 public:
  // in_thought: the prompt ended inside an open thought channel (thinking on). stop_ids: the generation config's.
  ReplyStream(const Tokenizer& tok, const ChatTokens& t, std::vector<int32_t> stop_ids, bool in_thought);

  std::vector<ReplyEvent> push(std::span<const int32_t> ids);
  std::vector<ReplyEvent> finish();  // ends the reply: flushes held bytes, reports an unclosed call
  const Reply& reply() const { return reply_; }
  bool done() const { return mode_ == Mode::kDone; }

 private:
  enum class Mode : uint8_t { kContent, kReasoning, kCall, kDone };
  struct Channel {
    explicit Channel(const Tokenizer& tok) : dec(tok, true) {}
    StreamDecoder dec;
    std::string label;        // text held while it may still be the channel's label ("thought\n")
    std::string_view expect;  // the label to strip at the start of this segment ("" once decided)
    std::string held_ws;      // trailing whitespace, emitted only if more text follows
    bool started = false;     // leading whitespace is behind us
  };

  void step(int32_t id, std::vector<ReplyEvent>& out);
  void text(Mode m, std::string s, std::vector<ReplyEvent>& out);  // label check, then whitespace rules
  void emit(Mode m, std::string s, std::vector<ReplyEvent>& out);
  void close_channel(Mode m, std::vector<ReplyEvent>& out);  // flush the decoder and any pending label
  void end_call(bool closed, const std::string& why, std::vector<ReplyEvent>& out);
  Channel& channel(Mode m) { return m == Mode::kReasoning ? reasoning_ : content_; }

  const Tokenizer& tok_;
  ChatTokens t_;
  std::vector<int32_t> stop_ids_;
  Channel content_, reasoning_;
  Mode mode_, call_return_ = Mode::kContent;
  std::vector<int32_t> call_ids_;
  size_t seen_ = 0;
  Reply reply_;
};

Reply parse_reply(std::span<const int32_t> ids, const Tokenizer& tok, const ChatTokens& t,
                  const std::vector<int32_t>& stop_ids, bool in_thought);

}  // namespace dg
