// SseEncoder: one job's events -> the Server-Sent Events body of an OpenAI stream. Chat: a role chunk first, then
// delta.content / delta.reasoning_content as committed text appears, delta.tool_calls (one chunk per call, id,
// name and the whole arguments string), draft previews only when asked, a finish chunk, a usage chunk when
// asked (stream_options.include_usage), then `data: [DONE]`. An error ends the stream with {"error":{...}}.
#pragma once

#include <string>

#include "serving/scheduler.h"
#include "server/wire_response.h"

namespace dg::server {

std::string sse_data(const Json& j);  // "data: {json}\n\n"

// What a streaming handler writes: one job's events as the bytes of a stream.
class StreamEncoder {
 public:
  virtual ~StreamEncoder() = default;
  virtual std::string start() = 0;                    // the first bytes, before the worker takes the job
  virtual std::string encode(const JobEvent& e) = 0;  // "" when the event has nothing for the client
  // A terminal error event; `code` "" for the status's own (error_code_of).
  virtual std::string error(int status, const std::string& message, const std::string& code = "") = 0;
  virtual bool finished() const = 0;
};
inline constexpr const char* kSseDone = "data: [DONE]\n\n";
inline constexpr const char* kSseHeartbeat = ": keep-alive\n\n";  // an SSE comment: clients ignore it

class SseEncoder final : public StreamEncoder {
 public:
  // `first`: fields added to the role chunk (chat).
  SseEncoder(ResponseMeta meta, bool chat, bool include_usage, Json first = Json::object())
      : meta_(std::move(meta)), chat_(chat), include_usage_(include_usage), first_(std::move(first)) {}

  std::string start() override;  // the first bytes: the role chunk (chat) or nothing (completions)
  std::string encode(const JobEvent& e) override;
  std::string error(int status, const std::string& message, const std::string& code = "") override;
  bool finished() const override { return finished_; }

 private:
  ResponseMeta meta_;
  bool chat_, include_usage_;
  Json first_;
  int n_calls_ = 0;
  bool finished_ = false;
};

}  // namespace dg::server
