#include "chat/tool_turn.h"

#include "chat/id_writer.h"
#include "chat/tools_render.h"

namespace dg {
namespace {

bool same_calls(const std::vector<ToolCall>& a, const std::vector<ToolCall>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].id != b[i].id || a[i].name != b[i].name || a[i].arguments != b[i].arguments) return false;
  return true;
}

}  // namespace

std::vector<int32_t> tool_turn_settled(const ToolTurn& turn, const ChatTokens& t) {
  std::vector<int32_t> ids = turn.ids;
  ids.push_back(t.response_open);
  return ids;
}

std::optional<RenderedPrompt> continue_tool_turn(const ToolTurn& turn, const Conversation& next,
                                                 const RenderOptions& ro, const Tokenizer& tok, const ChatTokens& t) {
  const std::vector<Message>& was = turn.conversation.messages;
  const std::vector<Message>& now = next.messages;
  if (was.empty() || now.size() <= was.size() || next.tools != turn.conversation.tools ||
      ro.thinking != turn.render.thinking || ro.open_thought != turn.render.open_thought)
    return std::nullopt;
  const size_t n = was.size();
  for (size_t i = 0; i + 1 < n; ++i)
    if (message_to_json(now[i]) != message_to_json(was[i])) return std::nullopt;
  const Message& reply = now[n - 1];
  if (reply.role != Role::kAssistant || !same_calls(reply.tool_calls, was[n - 1].tool_calls) ||
      reply.tool_calls.empty())
    return std::nullopt;
  IdWriter w(tok, t);
  for (size_t k = n; k < now.size(); ++k) {
    if (now[k].role != Role::kTool) return std::nullopt;
    render_response(w, response_name(reply, now[k]), response_value(now[k]));
  }
  RenderedPrompt p;
  p.ids = turn.ids;
  p.end = PromptEnd::kAnswer;
  if (ro.thinking && ro.open_thought) {
    w.marker(t.channel_open);
    w.text("thought\n");
    p.end = PromptEnd::kThought;
  }
  const std::vector<int32_t> rest = w.take();
  p.ids.insert(p.ids.end(), rest.begin(), rest.end());
  return p;
}

}  // namespace dg
