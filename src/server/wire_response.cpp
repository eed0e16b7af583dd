#include "server/wire_response.h"

namespace dg::server {
namespace {

Json finish_json(const std::string& finish) { return finish.empty() ? Json(nullptr) : Json(finish); }

Json tool_errors_json(const std::vector<ToolCallError>& errors) {
  Json a = Json::array();
  for (const ToolCallError& e : errors) a.push_back({{"message", e.message}, {"raw", e.raw}});
  return a;
}

}  // namespace

Json error_body(const std::string& message, const std::string& type, const std::string& code,
                const std::string& param) {
  return {{"error", {{"message", message}, {"type", type}, {"param", param.empty() ? Json(nullptr) : Json(param)},
                     {"code", code.empty() ? Json(nullptr) : Json(code)}}}};
}

std::string error_type_of(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "invalid_request_error";
    case 429: return "rate_limit_error";
    case 501: return "invalid_request_error";  // a transfer coding the client chose that this server does not take
    case 503: return "service_unavailable";
    case 504: return "timeout_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

std::string error_code_of(int status) {
  switch (status) {
    case 429: return "queue_full";
    case 499: return "client_closed";
    case 503: return "shutting_down";
    case 504: return "timeout";
    default: return "";
  }
}

Json usage_json(const Usage& u) {
  Json j = {{"prompt_tokens", u.prompt},
            {"completion_tokens", u.completion},
            {"total_tokens", u.prompt + u.completion},
            {"prompt_tokens_details", {{"cached_tokens", u.cached}}}};
  if (u.tool_attempts > 0) j["diffgemma_tool_attempts"] = u.tool_attempts;
  return j;
}

Json tool_call_json(const ToolCall& c, int index, bool with_index) {
  Json j = Json::object();
  if (with_index) j["index"] = index;
  j["id"] = c.id;
  j["type"] = "function";
  j["function"] = {{"name", c.name},
                   {"arguments", c.arguments.is_string() ? c.arguments.get<std::string>() : c.arguments.dump()}};
  return j;
}

Json chat_completion(const ResponseMeta& m, const JobEvent& done) {
  const Reply& r = done.reply;
  Json msg = {{"role", "assistant"}, {"content", r.content}};
  if (!r.reasoning.empty()) msg["reasoning_content"] = r.reasoning;
  if (!r.tool_calls.empty()) {
    msg["tool_calls"] = Json::array();
    for (size_t i = 0; i < r.tool_calls.size(); ++i)
      msg["tool_calls"].push_back(tool_call_json(r.tool_calls[i], static_cast<int>(i), false));
  }
  if (!r.errors.empty()) msg["diffgemma_tool_call_errors"] = tool_errors_json(r.errors);
  return {{"id", m.id},
          {"object", "chat.completion"},
          {"created", m.created},
          {"model", m.model},
          {"choices", Json::array({{{"index", 0}, {"message", msg}, {"logprobs", nullptr},
                                    {"finish_reason", done.finish}}})},
          {"usage", usage_json(done.usage)}};
}

Json text_completion(const ResponseMeta& m, const JobEvent& done) {
  return {{"id", m.id},
          {"object", "text_completion"},
          {"created", m.created},
          {"model", m.model},
          {"choices", Json::array({{{"index", 0}, {"text", done.reply.content}, {"logprobs", nullptr},
                                    {"finish_reason", done.finish}}})},
          {"usage", usage_json(done.usage)}};
}

Json chat_chunk(const ResponseMeta& m, const Json& delta, const std::string& finish) {
  return {{"id", m.id},
          {"object", "chat.completion.chunk"},
          {"created", m.created},
          {"model", m.model},
          {"choices", Json::array({{{"index", 0}, {"delta", delta}, {"logprobs", nullptr},
                                    {"finish_reason", finish_json(finish)}}})}};
}

Json chat_usage_chunk(const ResponseMeta& m, const Usage& u) {
  return {{"id", m.id},         {"object", "chat.completion.chunk"}, {"created", m.created},
          {"model", m.model},   {"choices", Json::array()},          {"usage", usage_json(u)}};
}

Json text_chunk(const ResponseMeta& m, const std::string& text, const std::string& finish) {
  return {{"id", m.id},
          {"object", "text_completion"},
          {"created", m.created},
          {"model", m.model},
          {"choices", Json::array({{{"index", 0}, {"text", text}, {"logprobs", nullptr},
                                    {"finish_reason", finish_json(finish)}}})}};
}

Json text_usage_chunk(const ResponseMeta& m, const Usage& u) {
  return {{"id", m.id},       {"object", "text_completion"}, {"created", m.created},
          {"model", m.model}, {"choices", Json::array()},    {"usage", usage_json(u)}};
}

Json model_object(const std::string& model, int64_t created) {
  return {{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "diffgemma"}};
}

Json model_list(const std::string& model, int64_t created) {
  return {{"object", "list"}, {"data", Json::array({model_object(model, created)})}};
}

}  // namespace dg::server
