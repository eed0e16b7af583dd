#include "chat/conversation.h"

#include <map>

#include "chat/json_depth.h"
#include "chat/text.h"
#include "core/error.h"

namespace dg {
namespace {

Role role_from_name(const std::string& s, const std::string& where) {
  if (s == "system") return Role::kSystem;
  if (s == "developer") return Role::kDeveloper;
  if (s == "user") return Role::kUser;
  if (s == "assistant" || s == "model") return Role::kAssistant;
  if (s == "tool") return Role::kTool;
  fail("{}.role: unknown role '{}' (expected system, developer, user, assistant or tool)", where, s);
}

std::string string_field(const Json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return {};
  DG_CHECK(j[key].is_string(), "{}.{} must be a string", where, key);
  return j[key].get<std::string>();
}

// Content as a string, or an array of text parts (the template joins them: trimmed for user and system turns,
// thought-stripped for model turns). Any other part (an image, audio, a file) is refused: the model reads text only.
std::string content_text(const Json& c, Role role, const std::string& where) {
  if (c.is_null()) return {};
  if (c.is_string()) return c.get<std::string>();
  DG_CHECK(c.is_array(), "{}.content must be a string, an array of parts or null", where);
  std::string out;
  for (size_t i = 0; i < c.size(); ++i) {
    const Json& p = c[i];
    DG_CHECK(p.is_object(), "{}.content[{}] must be an object", where, i);
    const std::string type = string_field(p, "type", fmt::format("{}.content[{}]", where, i));
    DG_CHECK(type == "text", "{}.content[{}] is a '{}' part: this model reads text only (send text parts)", where, i,
             type.empty() ? std::string("untyped") : type);
    DG_CHECK(p.contains("text") && !p["text"].is_null(), "{}.content[{}].text is missing (a text part carries its "
             "text)", where, i);
    const std::string t = string_field(p, "text", fmt::format("{}.content[{}]", where, i));
    out += role == Role::kAssistant ? strip_thinking_text(t) : py_strip(t);
  }
  return out;
}

ToolCall call_from_json(const Json& j, const std::string& where) {
  DG_CHECK(j.is_object(), "{} must be an object", where);
  ToolCall c;
  c.id = string_field(j, "id", where);
  const Json& f = j.contains("function") ? j["function"] : j;
  DG_CHECK(f.is_object(), "{}.function must be an object", where);
  c.name = string_field(f, "name", where + ".function");
  DG_CHECK(!c.name.empty(), "{}.function.name is missing", where);
  if (f.contains("arguments") && !f["arguments"].is_null()) {
    const Json& a = f["arguments"];
    if (a.is_string()) {
      // OpenAI sends arguments as a JSON string; an object inside renders key by key like the template's mapping.
      DG_CHECK(json_depth(a.get_ref<const std::string&>()) <= kMaxJsonDepth,
               "{}.function.arguments nests arrays and objects deeper than {} levels", where, kMaxJsonDepth);
      Json parsed = Json::parse(a.get<std::string>(), nullptr, false);
      c.arguments = parsed.is_object() ? parsed : a;
    } else {
      DG_CHECK(a.is_object(), "{}.function.arguments must be an object or a JSON string", where);
      c.arguments = a;
    }
  }
  return c;
}

}  // namespace

const char* role_name(Role r) {
  switch (r) {
    case Role::kSystem: return "system";
    case Role::kDeveloper: return "developer";
    case Role::kUser: return "user";
    case Role::kAssistant: return "assistant";
    case Role::kTool: return "tool";
  }
  return "user";
}

Message message_from_json(const Json& j, const std::string& where) {
  DG_CHECK(j.is_object(), "{} must be an object", where);
  DG_CHECK(j.contains("role") && j["role"].is_string(), "{}.role is missing", where);
  Message m;
  m.role = role_from_name(j["role"].get<std::string>(), where);
  // Content is required but on an assistant message that carries tool calls (OpenAI's rule): a missing one is not
  // an empty turn.
  const bool calls = j.contains("tool_calls") && j["tool_calls"].is_array() && !j["tool_calls"].empty();
  DG_CHECK((j.contains("content") && !j["content"].is_null()) || (m.role == Role::kAssistant && calls),
           "{}.content is missing ({} messages need content{})", where, role_name(m.role),
           m.role == Role::kAssistant ? " unless they carry tool_calls" : "");
  if (j.contains("content")) {
    const Json& c = j["content"];
    if (m.role == Role::kTool && (c.is_object() || c.is_number() || c.is_boolean()))
      m.response = c;
    else
      m.content = content_text(c, m.role, where);
  }
  m.reasoning = string_field(j, "reasoning_content", where);
  if (m.reasoning.empty()) m.reasoning = string_field(j, "reasoning", where);
  if (j.contains("tool_calls") && !j["tool_calls"].is_null()) {
    DG_CHECK(j["tool_calls"].is_array(), "{}.tool_calls must be an array", where);
    DG_CHECK(m.role == Role::kAssistant, "{}: only assistant messages carry tool_calls", where);
    for (size_t i = 0; i < j["tool_calls"].size(); ++i)
      m.tool_calls.push_back(call_from_json(j["tool_calls"][i], fmt::format("{}.tool_calls[{}]", where, i)));
  }
  m.tool_call_id = string_field(j, "tool_call_id", where);
  m.name = string_field(j, "name", where);
  return m;
}

Json message_to_json(const Message& m) {
  Json j = Json::object();
  j["role"] = role_name(m.role);
  if (m.role == Role::kTool && !m.response.is_null())
    j["content"] = m.response;
  else
    j["content"] = m.content;
  if (!m.reasoning.empty()) j["reasoning_content"] = m.reasoning;
  if (!m.tool_calls.empty()) {
    j["tool_calls"] = Json::array();
    for (const ToolCall& c : m.tool_calls)
      j["tool_calls"].push_back(
          {{"id", c.id}, {"type", "function"}, {"function",
            {{"name", c.name},
             {"arguments", c.arguments.is_string() ? c.arguments.get<std::string>() : c.arguments.dump()}}}});
  }
  if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
  if (!m.name.empty()) j["name"] = m.name;
  return j;
}

void check_tools(const Json& tools) {
  DG_CHECK(tools.is_array(), "tools must be an array of {{\"type\":\"function\",\"function\":{{...}}}}");
  std::map<std::string, size_t> seen;  // name -> the first tool that declares it
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    DG_CHECK(t.is_object() && t.contains("function") && t["function"].is_object(),
             "tools[{}] must be an object with a \"function\" object", i);
    const Json& f = t["function"];
    DG_CHECK(f.contains("name") && f["name"].is_string() && !f["name"].get<std::string>().empty(),
             "tools[{}].function.name is missing", i);
    // A call names its tool: two declarations of one name leave it undecided which schema the call meets.
    const auto [first, fresh] = seen.emplace(f["name"].get<std::string>(), i);
    DG_CHECK(fresh, "tools[{}] declares the function '{}' again (tools[{}] declares it): tool names must be unique", i,
             first->first, first->second);
    DG_CHECK(!f.contains("description") || f["description"].is_string() || f["description"].is_null(),
             "tools[{}].function.description must be a string", i);
    DG_CHECK(!f.contains("parameters") || f["parameters"].is_object() || f["parameters"].is_null(),
             "tools[{}].function.parameters must be a JSON schema object", i);
  }
}

std::optional<std::string> tool_turn_problem(const std::vector<Message>& msgs, bool open_round) {
  for (size_t i = 0; i < msgs.size(); ++i) {
    const Message& m = msgs[i];
    if (m.role == Role::kTool) {
      size_t j = i;
      while (j > 0 && msgs[j - 1].role == Role::kTool) --j;
      if (j == 0 || msgs[j - 1].role != Role::kAssistant || msgs[j - 1].tool_calls.empty())
        return fmt::format("messages[{}] is a tool result that follows no tool call: a role \"tool\" message must "
                           "come right after the assistant message whose call it answers", i);
      continue;
    }
    if (m.tool_calls.empty()) continue;
    size_t results = 0;
    while (i + 1 + results < msgs.size() && msgs[i + 1 + results].role == Role::kTool) ++results;
    if (i + 1 + results == msgs.size() && (results == 0 || open_round)) continue;
    if (results < m.tool_calls.size())
      return fmt::format("messages[{}] makes {} tool call(s) but {} result(s) follow it: add a role \"tool\" "
                         "message with each call's tool_call_id before the next turn", i, m.tool_calls.size(),
                         results);
  }
  return std::nullopt;
}

}  // namespace dg
