// The Gemma 4 chat template, rendered to token ids (the semantics of the model's chat_template.jinja, docs/CHAT.md):
//   <bos>[<|turn>system\n[<|think|>\n]{system}{<|tool>declaration…<tool|>…}<turn|>\n]
//   <|turn>user\n{text}<turn|>\n  <|turn>model\n{calls}{responses}{answer}<turn|>\n  …
//   generation prompt: <|turn>model\n<|channel>thought\n<channel|>   (thinking off: the thought channel closed)
//                      <|turn>model\n<|channel>thought\n             (thinking on: the channel left open)
// Earlier answers lose their reasoning (kept only inside the tool cycle after the last user turn). After a tool
// call with no response the prompt ends with <|tool_response>; after responses the model goes on in its turn.
#pragma once

#include <cstdint>
#include <vector>

#include "chat/chat_tokens.h"
#include "chat/conversation.h"
#include "io/tokenizer.h"

namespace dg {

struct RenderOptions {
  bool thinking = false;              // <|think|> in the system turn
  bool add_generation_prompt = true;  // end where the model writes next
  // Thinking on: the prompt opens the thought channel for the model (also after tool responses). Off: the
  // reference template's choice, where the model opens its own channel.
  bool open_thought = true;
};

enum class PromptEnd : uint8_t {
  kClosed,        // no generation prompt: the last turn is closed (or the render is empty)
  kAnswer,        // the model's turn is open: it writes its answer (thought channel closed)
  kThought,       // the model's turn is open inside the thought channel: it writes reasoning first
  kToolResponse,  // the last call has no response yet: a tool response is expected next
};

struct RenderedPrompt {
  std::vector<int32_t> ids;
  PromptEnd end = PromptEnd::kClosed;
};

// The name a tool message's response is rendered under: its call's name (by id), else its own name, else
// "unknown"; and its value (structured content, else the text).
std::string response_name(const Message& call_msg, const Message& tool_msg);
Json response_value(const Message& tool_msg);

// Throws dg::Error naming the bad message or tool (a tool message with no call before it is dropped, as the
// template does).
RenderedPrompt render_chat(const Conversation& conv, const RenderOptions& opt, const Tokenizer& tok,
                           const ChatTokens& t);

}  // namespace dg
