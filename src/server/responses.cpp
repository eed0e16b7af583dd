#include "server/responses.h"

#include <string_view>

#include <fmt/format.h>

namespace dg::server {
namespace {

[[noreturn]] void bad_input(const std::string& param, const std::string& message,
                      const std::string& code = "invalid_value") {
  throw ApiError(400, message, "invalid_request_error", code, param);
}

const Json* input_field(const Json& b, const char* key) {
  const auto it = b.find(key);
  return it == b.end() || it->is_null() ? nullptr : &*it;
}

// A message item's content as chat content: a string, or text parts. Parts that are not text keep their type,
// so the chat parser refuses them by name (the model reads text only).
Json message_content(const Json& c, const std::string& where) {
  if (c.is_string()) return c;
  if (!c.is_array()) bad_input("input", where + ".content must be a string or an array of content parts");
  Json parts = Json::array();
  for (size_t i = 0; i < c.size(); ++i) {
    const Json& p = c[i];
    if (!p.is_object() || !p.contains("type") || !p["type"].is_string())
      bad_input("input", where + ".content holds a part without a type");
    const std::string type = p["type"];
    if (type == "input_text" || type == "output_text" || type == "text") {
      if (!p.contains("text") || !p["text"].is_string())
        bad_input("input", fmt::format("{}.content[{}].text is missing (a '{}' part needs its text)", where, i, type));
      parts.push_back({{"type", "text"}, {"text", p["text"]}});
    } else {
      parts.push_back({{"type", type}});
    }
  }
  return parts;
}

// Responses tools ({type, name, description, parameters}) as chat tools ({type, function: {...}}).
Json chat_tools(const Json& tools) {
  if (!tools.is_array()) bad_input("tools", "'tools' must be an array of function tools");
  Json out = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    if (!t.is_object() || t.value("type", "") != "function")
      bad_input("tools", fmt::format("tools[{}]: only function tools are supported (got type '{}')", i,
                               t.is_object() ? t.value("type", "") : std::string()),
          "unsupported_value");
    Json f = Json::object();
    for (const char* k : {"name", "description", "parameters", "strict"})
      if (t.contains(k)) f[k] = t[k];
    out.push_back({{"type", "function"}, {"function", f}});
  }
  return out;
}

// Where a chat json_schema's schema is; a Responses format carries it as text.format.schema.
constexpr const char* kChatSchemaPath = "response_format.json_schema.schema";

// text.format ({type: "json_schema", name, schema, strict} flat) as a chat response_format ({type: "json_schema",
// json_schema: {name, schema, strict}}); other formats are the same in both APIs.
Json chat_response_format(const Json& format) {
  if (!format.is_object() || format.value("type", Json()) != "json_schema" || format.contains("json_schema"))
    return format;
  Json js = Json::object();
  for (const char* k : {"name", "description", "schema", "strict"})
    if (format.contains(k)) js[k] = format[k];
  return {{"type", "json_schema"}, {"json_schema", js}};
}

// input (a string, or items) -> chat messages.
void add_input(const Json& input, Json& messages) {
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input}});
    return;
  }
  if (!input.is_array() || input.empty()) bad_input("input", "'input' must be a string or a non-empty array of items");
  std::string reasoning;  // a reasoning item joins the assistant turn after it
  Json* calls = nullptr;  // the assistant message the function calls in a row join
  for (size_t i = 0; i < input.size(); ++i) {
    const Json& it = input[i];
    const std::string where = fmt::format("input[{}]", i);
    if (!it.is_object()) bad_input("input", where + " must be an object");
    const std::string type = it.value("type", it.contains("role") ? "message" : "");
    if (type != "function_call") calls = nullptr;
    if (type == "message") {
      const std::string role = it.value("role", "");
      if (!it.contains("content") || it["content"].is_null()) bad_input("input", where + ".content is missing");
      Json m = {{"role", role}, {"content", message_content(it["content"], where)}};
      if (role == "assistant" && !reasoning.empty()) m["reasoning_content"] = std::exchange(reasoning, {});
      messages.push_back(m);
    } else if (type == "function_call") {
      if (!it.contains("call_id") || !it.contains("name"))
        bad_input("input", where + ": a function_call needs call_id and name");
      if (calls == nullptr) {
        messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", Json::array()}});
        if (!reasoning.empty()) messages.back()["reasoning_content"] = std::exchange(reasoning, {});
        calls = &messages.back();
      }
      const Json function = {{"name", it["name"]}, {"arguments", it.value("arguments", "{}")}};
      (*calls)["tool_calls"].push_back({{"id", it["call_id"]}, {"type", "function"}, {"function", function}});
    } else if (type == "function_call_output") {
      if (!it.contains("call_id")) bad_input("input", where + ": a function_call_output needs the call_id it answers");
      if (!it.contains("output") || it["output"].is_null())
        bad_input("input", where + ": a function_call_output needs the call's output");
      const Json& out = it["output"];
      messages.push_back({{"role", "tool"}, {"tool_call_id", it["call_id"]},
                          {"content", out.is_string() ? out : Json(out.dump())}});
    } else if (type == "reasoning") {
      for (const char* key : {"content", "summary"})
        if (it.contains(key) && it[key].is_array())
          for (const Json& p : it[key])
            if (p.is_object() && p.contains("text") && p["text"].is_string()) reasoning += p["text"].get<std::string>();
    } else {
      bad_input("input", fmt::format("{}: items of type '{}' are not supported (messages, function_call, "
                               "function_call_output and reasoning are)", where, type),
          "unsupported_value");
    }
  }
}

Json usage_object(const Usage& u) {
  Json j = {{"input_tokens", u.prompt},
            {"input_tokens_details", {{"cached_tokens", u.cached}}},
            {"output_tokens", u.completion},
            {"output_tokens_details", {{"reasoning_tokens", 0}}},
            {"total_tokens", u.prompt + u.completion}};
  if (u.tool_attempts > 0) j["diffgemma_tool_attempts"] = u.tool_attempts;
  return j;
}

Json item_json(const ResponseItem& it, const std::string& status) {
  switch (it.kind) {
    case ResponseItem::Kind::kReasoning:
      return {{"type", "reasoning"}, {"id", it.id}, {"summary", Json::array()},
              {"content", Json::array({{{"type", "reasoning_text"}, {"text", it.text}}})}};
    case ResponseItem::Kind::kMessage:
      return {{"type", "message"}, {"id", it.id}, {"status", status}, {"role", "assistant"},
              {"content", Json::array({{{"type", "output_text"}, {"text", it.text}, {"annotations", Json::array()}}})}};
    case ResponseItem::Kind::kFunctionCall:
      return {{"type", "function_call"}, {"id", it.id}, {"call_id", it.call_id}, {"name", it.name},
              {"arguments", it.text}, {"status", status}};
  }
  return {};
}

std::string item_id(const ResponseMeta& m, ResponseItem::Kind kind, size_t index) {
  const char* prefix = kind == ResponseItem::Kind::kReasoning ? "rs"
                       : kind == ResponseItem::Kind::kMessage ? "msg"
                                                              : "fc";
  return fmt::format("{}_{}_{}", prefix, m.id.substr(m.id.find('_') + 1), index);
}

std::string arguments_text(const ToolCall& c) {
  return c.arguments.is_string() ? c.arguments.get<std::string>() : c.arguments.dump();
}

}  // namespace

ParsedRequest parse_responses_request(const Json& b, const WireContext& ctx) {
  if (input_field(b, "previous_response_id") != nullptr)
    bad_input("previous_response_id", "this server stores no responses: send the whole conversation as 'input'",
        "unsupported_parameter");
  Json chat = Json::object();
  Json messages = Json::array();
  if (const Json* ins = input_field(b, "instructions")) {
    if (!ins->is_string()) bad_input("instructions", "'instructions' must be a string");
    messages.push_back({{"role", "system"}, {"content", *ins}});
  }
  const Json* input = input_field(b, "input");
  if (input == nullptr) bad_input("input", "'input' is missing");
  add_input(*input, messages);
  chat["messages"] = messages;
  if (const Json* tools = input_field(b, "tools")) chat["tools"] = chat_tools(*tools);
  if (const Json* tc = input_field(b, "tool_choice")) chat["tool_choice"] = *tc;
  if (const Json* n = input_field(b, "max_output_tokens")) chat["max_tokens"] = *n;
  if (const Json* text = input_field(b, "text")) {
    if (!text->is_object()) bad_input("text", "'text' must be an object");
    if (const Json* format = input_field(*text, "format")) chat["response_format"] = chat_response_format(*format);
  }
  if (const Json* r = input_field(b, "reasoning")) {
    if (!r->is_object()) bad_input("reasoning", "'reasoning' must be an object");
    if (const Json* effort = input_field(*r, "effort")) chat["reasoning_effort"] = *effort;
  }
  // The fields both APIs share, and the DiffusionGemma extensions.
  for (const char* k : {"model", "stream", "stop", "seed", "user", "temperature", "top_p", "steps", "entropy_bound",
                        "confidence_threshold", "t_min", "t_max", "sampler", "thinking", "drafts",
                        "chat_template_kwargs", "tool_check", "tool_attempts"})
    if (const Json* f = input_field(b, k)) chat[k] = *f;
  try {
    return parse_chat_request(chat, ctx);
  } catch (ApiError& e) {
    if (e.param == "max_tokens") {  // the chat field's name in the message too: the client sent max_output_tokens
      std::string m = e.what();
      for (size_t at = m.find("'max_tokens'"); at != std::string::npos; at = m.find("'max_tokens'", at))
        m.replace(at, std::string_view("'max_tokens'").size(), "'max_output_tokens'");
      throw ApiError(e.status, m, e.type, e.code, "max_output_tokens");
    }
    if (e.param == "reasoning_effort")
      throw ApiError(e.status, "'reasoning.effort' must be \"none\", \"minimal\", \"low\", \"medium\" or \"high\"",
                     e.type, e.code, "reasoning.effort");
    if (e.param == "response_format") {
      std::string m = e.what();
      for (size_t at = m.find(kChatSchemaPath); at != std::string::npos; at = m.find(kChatSchemaPath, at))
        m.replace(at, std::string_view(kChatSchemaPath).size(), "text.format.schema");
      throw ApiError(e.status, m, e.type, e.code, "text.format");
    }
    if (e.param.rfind("messages", 0) == 0)
      throw ApiError(e.status, fmt::format("input (as chat messages, instructions first): {}", e.what()), e.type,
                     e.code, "input");
    throw;
  }
}

std::string response_status(const std::string& finish) { return finish == "length" ? "incomplete" : "completed"; }

std::vector<ResponseItem> response_items(const ResponseMeta& m, const Reply& reply) {
  std::vector<ResponseItem> items;
  auto add = [&](ResponseItem::Kind kind) -> ResponseItem& {
    items.push_back({kind, item_id(m, kind, items.size()), "", "", ""});
    return items.back();
  };
  if (!reply.reasoning.empty()) add(ResponseItem::Kind::kReasoning).text = reply.reasoning;
  if (!reply.content.empty() || reply.tool_calls.empty()) add(ResponseItem::Kind::kMessage).text = reply.content;
  for (const ToolCall& c : reply.tool_calls) {
    ResponseItem& it = add(ResponseItem::Kind::kFunctionCall);
    it.text = arguments_text(c);
    it.call_id = c.id;
    it.name = c.name;
  }
  return items;
}

Json response_object(const ResponseMeta& m, const Json& request, const std::string& status,
                     const std::vector<ResponseItem>& items, const Usage* usage, const std::string& finish,
                     const Json& error) {
  Json output = Json::array();
  const std::string item_status = status == "in_progress" ? "in_progress" : "completed";
  for (const ResponseItem& it : items) output.push_back(item_json(it, item_status));
  auto echo = [&](const char* key, Json dflt) {
    const auto it = request.find(key);
    return it == request.end() || it->is_null() ? dflt : *it;
  };
  return {{"id", m.id},
          {"object", "response"},
          {"created_at", m.created},
          {"status", status},
          {"model", m.model},
          {"output", output},
          {"usage", usage != nullptr ? usage_object(*usage) : Json(nullptr)},
          {"error", error},
          {"incomplete_details", status == "incomplete" ? Json{{"reason", "max_output_tokens"}} : Json(nullptr)},
          {"instructions", echo("instructions", nullptr)},
          {"max_output_tokens", echo("max_output_tokens", nullptr)},
          {"parallel_tool_calls", echo("parallel_tool_calls", true)},
          {"previous_response_id", nullptr},
          {"reasoning", {{"effort", nullptr}, {"summary", nullptr}}},
          {"store", false},
          {"temperature", echo("temperature", nullptr)},
          {"top_p", echo("top_p", nullptr)},
          {"text", echo("text", {{"format", {{"type", "text"}}}})},
          {"tool_choice", echo("tool_choice", "auto")},
          {"tools", echo("tools", Json::array())},
          {"truncation", "disabled"},
          {"user", echo("user", nullptr)},
          {"metadata", echo("metadata", Json::object())},
          {"diffgemma_finish_reason", finish.empty() ? Json(nullptr) : Json(finish)}};
}

std::string ResponsesStream::event(const std::string& type, Json data) {
  data["type"] = type;
  data["sequence_number"] = seq_++;
  return "event: " + type + "\ndata: " + data.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
}

std::string ResponsesStream::start() {
  Json r = response_object(meta_, request_, "in_progress", {}, nullptr, "");
  r.update(first_);
  std::string out = event("response.created", {{"response", r}});
  return out + event("response.in_progress", {{"response", r}});
}

std::string ResponsesStream::close() {
  if (!item_open_) return {};
  item_open_ = false;
  const ResponseItem& it = items_.back();
  const auto index = static_cast<int64_t>(items_.size() - 1);
  std::string out;
  if (it.kind == ResponseItem::Kind::kMessage || it.kind == ResponseItem::Kind::kReasoning) {
    const bool msg = it.kind == ResponseItem::Kind::kMessage;
    const Json part = msg ? Json{{"type", "output_text"}, {"text", it.text}, {"annotations", Json::array()}}
                          : Json{{"type", "reasoning_text"}, {"text", it.text}};
    out += event(msg ? "response.output_text.done" : "response.reasoning_text.done",
                 {{"item_id", it.id}, {"output_index", index}, {"content_index", 0}, {"text", it.text}});
    out += event("response.content_part.done",
                 {{"item_id", it.id}, {"output_index", index}, {"content_index", 0}, {"part", part}});
  } else {
    out += event("response.function_call_arguments.done",
                 {{"item_id", it.id}, {"output_index", index}, {"arguments", it.text}});
  }
  out += event("response.output_item.done", {{"output_index", index}, {"item", item_json(it, "completed")}});
  return out;
}

std::string ResponsesStream::open(ResponseItem::Kind kind) {
  if (item_open_ && items_.back().kind == kind && kind != ResponseItem::Kind::kFunctionCall) return {};
  std::string out = close();
  items_.push_back({kind, item_id(meta_, kind, items_.size()), "", "", ""});
  item_open_ = true;
  return out;
}

std::string ResponsesStream::encode(const JobEvent& e) {
  if (finished_) return {};
  const auto index = [&] { return static_cast<int64_t>(items_.size() - 1); };
  switch (e.kind) {
    case JobEvent::Kind::kContent:
    case JobEvent::Kind::kReasoning: {
      const bool msg = e.kind == JobEvent::Kind::kContent;
      const auto kind = msg ? ResponseItem::Kind::kMessage : ResponseItem::Kind::kReasoning;
      const bool fresh = !(item_open_ && items_.back().kind == kind);
      std::string out = open(kind);
      ResponseItem& it = items_.back();
      if (fresh) {
        Json item = item_json(it, "in_progress");
        item["content"] = Json::array();
        out += event("response.output_item.added", {{"output_index", index()}, {"item", item}});
        const Json part = msg ? Json{{"type", "output_text"}, {"text", ""}, {"annotations", Json::array()}}
                              : Json{{"type", "reasoning_text"}, {"text", ""}};
        out += event("response.content_part.added",
                     {{"item_id", it.id}, {"output_index", index()}, {"content_index", 0}, {"part", part}});
      }
      it.text += e.text;
      out += event(msg ? "response.output_text.delta" : "response.reasoning_text.delta",
                   {{"item_id", it.id}, {"output_index", index()}, {"content_index", 0}, {"delta", e.text}});
      return out;
    }
    case JobEvent::Kind::kToolCall: {
      std::string out = open(ResponseItem::Kind::kFunctionCall);
      ResponseItem& it = items_.back();
      it.call_id = e.call.id;
      it.name = e.call.name;
      Json item = item_json(it, "in_progress");
      out += event("response.output_item.added", {{"output_index", index()}, {"item", item}});
      it.text = arguments_text(e.call);
      out += event("response.function_call_arguments.delta",
                   {{"item_id", it.id}, {"output_index", index()}, {"delta", it.text}});
      out += close();
      return out;
    }
    case JobEvent::Kind::kToolError:
    case JobEvent::Kind::kDraft: return {};  // the call's text follows as content; drafts are chat-only
    case JobEvent::Kind::kDone: {
      finished_ = true;
      std::string out = close();
      const std::string status = response_status(e.finish);
      Json r = response_object(meta_, request_, status, items_, &e.usage, e.finish);
      if (!e.reply.errors.empty()) {
        r["diffgemma_tool_call_errors"] = Json::array();
        for (const ToolCallError& te : e.reply.errors)
          r["diffgemma_tool_call_errors"].push_back({{"message", te.message}, {"raw", te.raw}});
      }
      out += event(status == "completed" ? "response.completed" : "response.incomplete", {{"response", r}});
      return out;
    }
    case JobEvent::Kind::kError: return error(e.status, e.text, e.code);
  }
  return {};
}

std::string ResponsesStream::error(int status, const std::string& message, const std::string& code_given) {
  finished_ = true;
  const std::string code = code_given.empty() ? error_code_of(status) : code_given;
  const Json err = {{"code", code.empty() ? Json(nullptr) : Json(code)}, {"message", message},
                    {"type", error_type_of(status)}};
  std::string out = close();
  out += event("response.failed", {{"response", response_object(meta_, request_, "failed", items_, nullptr, "", err)}});
  return out;
}

}  // namespace dg::server
