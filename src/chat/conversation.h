// A chat conversation as the renderer sees it: OpenAI-style messages (system/developer, user, assistant with
// reasoning and tool calls, tool results) plus the tool declarations (OpenAI `tools`, JSON schema parameters).
// Conversion from and to the OpenAI wire JSON validates every field and names the bad one in its dg::Error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dg {

using Json = nlohmann::ordered_json;  // keeps the client's key order (Jinja's dictsort ties keep it too)

enum class Role : uint8_t { kSystem, kDeveloper, kUser, kAssistant, kTool };
const char* role_name(Role r);  // "system", "developer", "user", "assistant", "tool"

struct ToolCall {
  std::string id;    // "call_0", ...: matches a tool message's tool_call_id
  std::string name;
  Json arguments = Json::object();  // an object; a string that is not a JSON object is rendered verbatim
};

struct Message {
  Role role = Role::kUser;
  std::string content;
  std::string reasoning;            // assistant: the thought channel (kept in a prompt only within a tool cycle)
  std::vector<ToolCall> tool_calls;  // assistant
  std::string tool_call_id, name;    // tool: which call this answers, and the tool's name
  Json response;                     // tool: structured (non-string) content, rendered field by field
};

struct Conversation {
  std::vector<Message> messages;
  Json tools = Json::array();  // [{"type":"function","function":{"name","description","parameters"}}]
};

// OpenAI chat message JSON <-> Message. `where` names the message in errors ("messages[3]").
Message message_from_json(const Json& j, const std::string& where);
Json message_to_json(const Message& m);
// Validates an OpenAI `tools` array (each entry a function with a name); throws dg::Error naming the entry.
void check_tools(const Json& tools);
// What keeps the template from rendering the tool turns as given, or nothing: a role "tool" message that follows no
// assistant tool call (the template would drop it), or an assistant message whose calls are not each answered by
// the tool messages right after it before the next turn (the last message may be the calls themselves; with
// `open_round`, the calls and some of their results: a round whose results are still coming in).
std::optional<std::string> tool_turn_problem(const std::vector<Message>& msgs, bool open_round = false);

}  // namespace dg
