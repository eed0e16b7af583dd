#include "chat/template.h"

#include "chat/id_writer.h"
#include "chat/text.h"
#include "chat/tools_render.h"

namespace dg {
namespace {

enum class Last : uint8_t { kNone, kThink, kTool, kToolCall, kToolResponse };

bool is_system(Role r) { return r == Role::kSystem || r == Role::kDeveloper; }

}  // namespace

std::string response_name(const Message& call_msg, const Message& tool_msg) {
  std::string name = tool_msg.name.empty() ? "unknown" : tool_msg.name;
  for (const ToolCall& c : call_msg.tool_calls)
    if (!c.id.empty() && c.id == tool_msg.tool_call_id) name = c.name;
  return name;
}

Json response_value(const Message& m) { return m.response.is_null() ? Json(m.content) : m.response; }

RenderedPrompt render_chat(const Conversation& conv, const RenderOptions& opt, const Tokenizer& tok,
                           const ChatTokens& t) {
  check_tools(conv.tools);
  IdWriter w(tok, t);
  Last last = Last::kNone;
  const std::vector<Message>& msgs = conv.messages;
  size_t begin = 0;
  w.marker(t.bos);
  const bool system_first = !msgs.empty() && is_system(msgs[0].role);
  if (opt.thinking || !conv.tools.empty() || system_first) {
    w.marker(t.turn_open);
    w.text("system\n");
    if (opt.thinking) {
      w.marker(t.think);
      w.text("\n");
      last = Last::kThink;
    }
    if (system_first) {
      w.text(py_strip(msgs[0].content));
      begin = 1;
    }
    for (const Json& tool : conv.tools) {
      w.marker(t.tool_open);
      render_declaration(w, tool);
      w.marker(t.tool_close);
    }
    if (!conv.tools.empty()) last = Last::kTool;
    w.marker(t.turn_close);
    w.text("\n");
  }
  size_t last_user = SIZE_MAX;
  for (size_t i = begin; i < msgs.size(); ++i)
    if (msgs[i].role == Role::kUser) last_user = i;

  for (size_t i = begin; i < msgs.size(); ++i) {
    const Message& m = msgs[i];
    if (m.role == Role::kTool) continue;  // rendered with the assistant turn whose calls it answers
    last = Last::kNone;
    const bool model = m.role == Role::kAssistant;
    // An assistant message right after an assistant turn (tool messages between) continues that turn.
    const Message* prev = nullptr;
    for (size_t j = i; j-- > begin;)
      if (msgs[j].role != Role::kTool) {
        prev = &msgs[j];
        break;
      }
    if (!(model && prev != nullptr && prev->role == Role::kAssistant)) {
      w.marker(t.turn_open);
      w.text(std::string(model ? "model" : role_name(m.role)) + "\n");
    }
    const bool after_last_user = last_user == SIZE_MAX || i > last_user;
    if (!m.reasoning.empty() && after_last_user && !m.tool_calls.empty()) {
      w.marker(t.channel_open);
      w.text("thought\n");
      w.text(m.reasoning);
      w.text("\n");
      w.marker(t.channel_close);
    }
    for (const ToolCall& c : m.tool_calls) render_call(w, c);
    if (!m.tool_calls.empty()) last = Last::kToolCall;
    bool responded = false;
    if (!m.tool_calls.empty())
      for (size_t k = i + 1; k < msgs.size() && msgs[k].role == Role::kTool; ++k) {
        render_response(w, response_name(m, msgs[k]), response_value(msgs[k]));
        responded = true;
        last = Last::kToolResponse;
      }
    const std::string content = model ? strip_thinking_text(m.content) : py_strip(m.content);
    w.text(content);
    if (last == Last::kToolCall && !responded) {
      w.marker(t.response_open);
    } else if (!(responded && content.empty())) {
      w.marker(t.turn_close);
      w.text("\n");
    }
  }

  RenderedPrompt out;
  if (!msgs.empty() && last == Last::kToolCall) out.end = PromptEnd::kToolResponse;
  if (opt.add_generation_prompt) {
    if (last != Last::kToolResponse && last != Last::kToolCall) {
      w.marker(t.turn_open);
      w.text("model\n");
      out.end = PromptEnd::kAnswer;
      if (!opt.thinking) {  // the empty closed thought channel: answer directly
        w.marker(t.channel_open);
        w.text("thought\n");
        w.marker(t.channel_close);
      } else if (opt.open_thought) {
        w.marker(t.channel_open);
        w.text("thought\n");
        out.end = PromptEnd::kThought;
      }
    } else if (last == Last::kToolResponse) {  // the model goes on in its turn
      out.end = PromptEnd::kAnswer;
      if (opt.thinking && opt.open_thought) {
        w.marker(t.channel_open);
        w.text("thought\n");
        out.end = PromptEnd::kThought;
      }
    }
  }
  out.ids = w.take();
  return out;
}

}  // namespace dg
