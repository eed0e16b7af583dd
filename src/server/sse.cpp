#include "server/sse.h"

namespace dg::server {

std::string sse_data(const Json& j) {
  return "data: " + j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
}

std::string SseEncoder::start() {
  if (!chat_) return {};
  Json c = chat_chunk(meta_, {{"role", "assistant"}, {"content", ""}}, "");
  c.update(first_);
  return sse_data(c);
}

std::string SseEncoder::error(int status, const std::string& message, const std::string& code) {
  finished_ = true;
  return sse_data(error_body(message, error_type_of(status), code.empty() ? error_code_of(status) : code));
}

std::string SseEncoder::encode(const JobEvent& e) {
  if (finished_) return {};
  switch (e.kind) {
    case JobEvent::Kind::kContent:
      return sse_data(chat_ ? chat_chunk(meta_, {{"content", e.text}}, "") : text_chunk(meta_, e.text, ""));
    case JobEvent::Kind::kReasoning:
      return chat_ ? sse_data(chat_chunk(meta_, {{"reasoning_content", e.text}}, "")) : std::string();
    case JobEvent::Kind::kToolCall:
      if (!chat_) return {};
      return sse_data(chat_chunk(meta_, {{"tool_calls", Json::array({tool_call_json(e.call, n_calls_++, true)})}},
                                 ""));
    case JobEvent::Kind::kToolError: {
      if (!chat_) return {};
      Json c = chat_chunk(meta_, Json::object(), "");
      c["diffgemma_tool_call_errors"] = Json::array({{{"message", e.tool_error.message}, {"raw", e.tool_error.raw}}});
      return sse_data(c);
    }
    case JobEvent::Kind::kDraft: {
      Json c = chat_ ? chat_chunk(meta_, Json::object(), "") : text_chunk(meta_, "", "");
      c["diffgemma_draft"] = {{"block", e.block}, {"step", e.step}, {"text", e.text}};
      return sse_data(c);
    }
    case JobEvent::Kind::kDone: {
      finished_ = true;
      std::string out = sse_data(chat_ ? chat_chunk(meta_, Json::object(), e.finish) : text_chunk(meta_, "", e.finish));
      if (include_usage_) out += sse_data(chat_ ? chat_usage_chunk(meta_, e.usage) : text_usage_chunk(meta_, e.usage));
      return out + kSseDone;
    }
    case JobEvent::Kind::kError: return error(e.status, e.text, e.code);
  }
  return {};
}

}  // namespace dg::server
