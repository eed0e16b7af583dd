// OpenAI response bodies: chat completions and their stream chunks, text completions, errors, the model list.
// Extensions beyond the OpenAI schema: message/delta `reasoning_content` (the thought channel, as vLLM names it),
// `diffgemma_tool_call_errors` (calls the model wrote malformed), chunk `diffgemma_draft` (canvas previews).
#pragma once

#include <cstdint>
#include <string>

#include "chat/conversation.h"
#include "serving/scheduler.h"

namespace dg::server {

struct ResponseMeta {
  std::string id;     // "chatcmpl-…" / "cmpl-…"
  int64_t created = 0;  // Unix seconds
  std::string model;
};

Json error_body(const std::string& message, const std::string& type, const std::string& code = "",
                const std::string& param = "");
std::string error_type_of(int status);  // the OpenAI error type for an HTTP status
// The `code` of an error that has no more specific one: "timeout" (504), "queue_full" (429), "shutting_down" (503),
// "client_closed" (499), "" (null) otherwise. The plain and the streamed form of one error carry the same code.
std::string error_code_of(int status);

Json usage_json(const Usage& u);
Json tool_call_json(const ToolCall& c, int index, bool with_index);

// Non-streaming responses from the job's kDone event.
Json chat_completion(const ResponseMeta& m, const JobEvent& done);
Json text_completion(const ResponseMeta& m, const JobEvent& done);

// Stream chunks. `finish` is "" for none.
Json chat_chunk(const ResponseMeta& m, const Json& delta, const std::string& finish);
Json chat_usage_chunk(const ResponseMeta& m, const Usage& u);
Json text_chunk(const ResponseMeta& m, const std::string& text, const std::string& finish);
Json text_usage_chunk(const ResponseMeta& m, const Usage& u);

Json model_object(const std::string& model, int64_t created);  // GET /v1/models/{id}
Json model_list(const std::string& model, int64_t created);

}  // namespace dg::server
