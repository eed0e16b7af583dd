// SseEncoder: one job's events -> the Server-Sent Events body of an OpenAI stream. Chat: a role chunk first, then
// delta.content / delta.reasoning_content as committed text appears, delta.tool_calls (one chunk per call, id,
// name and the whole arguments string), draft previews only when asked, a finish chunk, a usage chunk when
// asked (stream_options.include_usage), then `data: [DONE]`. An error ends the stream with {"error":{...}}.
#pragma once

#include <string>

#include "engine/scheduler.h"
#include "server/wire_response.h"

namespace dg::server {

std::string sse_data(const Json& j);  // "data: {json}\n\n"
inline constexpr const char* kSseDone = "data: [DONE]\n\n";
inline constexpr const char* kSseHeartbeat = ": keep-alive\n\n";  // an SSE comment: clients ignore it

class SseEncoder {
 public:
  SseEncoder(ResponseMeta meta, bool chat, bool include_usage)
      : meta_(std::move(meta)), chat_(chat), include_usage_(include_usage) {}

  std::string start();                    // the first bytes: the role chunk (chat) or nothing (completions)
  std::string encode(const JobEvent& e);  // "" when the event has nothing for the client
  std::string error(int status, const std::string& message);  // a terminal error event
  bool finished() const { return finished_; }

 private:
  ResponseMeta meta_;
  bool chat_, include_usage_;
  int n_calls_ = 0;
  bool finished_ = false;
};

}  // namespace dg::server
