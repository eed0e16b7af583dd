// The OpenAI Responses API (POST /v1/responses) over the chat path: a Responses body (instructions, input items:
// messages, function calls and their outputs, reasoning; function tools; max_output_tokens; text.format) is turned
// into a chat request and parsed by parse_chat_request, so every check of the chat endpoint holds. The answer is a
// response object (reasoning, message and function_call output items), or a stream of the typed events the SDKs
// accumulate (response.created ... response.completed / incomplete / failed). Nothing is stored: previous_response_id
// is refused. docs/SERVER.md, "Responses API".
#pragma once

#include <string>
#include <vector>

#include "serving/scheduler.h"
#include "server/sse.h"
#include "server/wire_request.h"
#include "server/wire_response.h"

namespace dg::server {

// The Responses body as a chat request (ApiError 400 naming the input item or field it cannot take).
ParsedRequest parse_responses_request(const Json& body, const WireContext& ctx);

// One output item of a response, as it is built.
struct ResponseItem {
  enum class Kind : uint8_t { kReasoning, kMessage, kFunctionCall };
  Kind kind = Kind::kMessage;
  std::string id, text;  // text: the reasoning, the message text, or the call's arguments
  std::string call_id, name;  // function calls
};

// The response object. `status`: in_progress, completed, incomplete, failed; `request`: the request body (echoed
// fields: instructions, tools, tool_choice, temperature, top_p, max_output_tokens, user, metadata).
Json response_object(const ResponseMeta& m, const Json& request, const std::string& status,
                     const std::vector<ResponseItem>& items, const Usage* usage, const std::string& finish,
                     const Json& error = nullptr);
// The output items of a finished job's reply, in order: reasoning, the message, then each call.
std::vector<ResponseItem> response_items(const ResponseMeta& m, const Reply& reply);
// completed, or incomplete when the token budget ended the answer.
std::string response_status(const std::string& finish);

// A job's events -> the Responses event stream (`event: TYPE` / `data: {...}` with sequence numbers).
class ResponsesStream final : public StreamEncoder {
 public:
  // `first`: fields added to the response object of response.created.
  ResponsesStream(ResponseMeta meta, Json request, Json first = Json::object())
      : meta_(std::move(meta)), request_(std::move(request)), first_(std::move(first)) {}
  std::string start() override;  // response.created, response.in_progress
  std::string encode(const JobEvent& e) override;
  std::string error(int status, const std::string& message, const std::string& code = "") override;  // response.failed
  bool finished() const override { return finished_; }

 private:
  std::string event(const std::string& type, Json data);
  std::string open(ResponseItem::Kind kind);  // closes the item in progress, opens one of this kind
  std::string close();                        // the *.done events of the item in progress
  ResponseMeta meta_;
  Json request_, first_;
  std::vector<ResponseItem> items_;
  bool item_open_ = false, finished_ = false;
  int64_t seq_ = 0;
};

}  // namespace dg::server
