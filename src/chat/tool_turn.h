// Tool-turn continuation: a reply that calls tools leaves the cache holding the prompt and the reply exactly as the
// model wrote it (its reasoning included), ended by <|tool_response> — the form the canonical render of a pending
// call also ends in, so it is prefix-stable. A request that continues that turn (the same messages, the reply's
// calls echoed back with or without their reasoning and text, then the results) is prompted as that raw token log
// plus the rendered results and, when thinking, the thought channel reopened: the cache is extended, never
// re-rendered without the reasoning the model planned with. The round that ends the turn (no calls) settles on the
// canonical render as any other turn does. docs/TOOLS.md.
#pragma once

#include <optional>
#include <vector>

#include "chat/chat_tokens.h"
#include "chat/conversation.h"
#include "chat/template.h"
#include "io/tokenizer.h"

namespace dg {

struct ToolTurn {
  Conversation conversation;  // the messages the reply answered, then the reply's assistant message (with call ids)
  std::vector<int32_t> ids;   // the prompt, then the reply as generated, up to (not including) <|tool_response>
  RenderOptions render;       // how the prompt was rendered (thinking)
};

// What the cache settles on after the reply: ids then <|tool_response>.
std::vector<int32_t> tool_turn_settled(const ToolTurn& turn, const ChatTokens& t);

// Whether `next` continues `turn`: the same tools and thinking, the same messages before the reply, an assistant
// message with the same calls (ids, names, arguments; its reasoning and content are not compared: clients drop
// them), then one or more tool messages and nothing else. Then the prompt for the model's next round: the turn's
// ids, each result as the template renders it, and the thought channel reopened when thinking with open_thought.
std::optional<RenderedPrompt> continue_tool_turn(const ToolTurn& turn, const Conversation& next,
                                                 const RenderOptions& ro, const Tokenizer& tok, const ChatTokens& t);

}  // namespace dg
