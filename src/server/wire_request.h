// OpenAI request bodies -> JobSpec (token ids, sampler, stop strings). Every field is checked: a wrong type, an
// out-of-range value or an unsupported option throws ApiError (HTTP 400 with an OpenAI-style error body naming
// the field); unknown fields are ignored. Chat prompts are rendered here, on the HTTP thread, so the worker only
// sees token ids and a prompt that does not fit the context is refused before it queues.
#pragma once

#include <stdexcept>
#include <string>

#include "chat/chat_tokens.h"
#include "chat/conversation.h"
#include "engine/chat.h"
#include "serving/scheduler.h"
#include "engine/tool_check.h"
#include "io/tokenizer.h"

namespace dg::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message, std::string type = "invalid_request_error",
           std::string code = "", std::string param = "")
      : std::runtime_error(message), status(status), type(std::move(type)), code(std::move(code)),
        param(std::move(param)) {}
  int status;
  std::string type, code, param;
};

// What parsing needs from the engine.
struct WireContext {
  const Tokenizer& tok;
  const ChatTokens& chat_tokens;
  SamplerOptions contract, reference;  // the engine's defaults per sampler profile
  int64_t context = 8192;              // prompt + max_tokens must fit
  bool allow_special_literals = false;
  // response_format json_object's and json_schema's vocabulary table (chat_json_vocab)
  std::shared_ptr<const JsonVocab> json_vocab;
  ToolCheckOptions tool_check;  // a request's `tool_check` and `tool_attempts` default (serve --tool-check)
  // strict tools' call vocabulary table (chat_call_vocab)
  std::shared_ptr<const JsonVocab> call_vocab;
  // Per-request work (--max-steps, --max-tokens): a request over either is refused with 400 naming the limit.
  int max_steps = 128;      // denoise steps per block
  int64_t max_tokens = 0;   // answer tokens (so blocks); 0: the rest of the context
};

struct ParsedRequest {
  JobSpec spec;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::string user;            // the end user the client names: KV-cache reuse stays within one user
};

// The body as JSON; malformed JSON (invalid UTF-8 included) or a non-object throws ApiError 400.
Json parse_body(const std::string& body);
ParsedRequest parse_chat_request(const Json& body, const WireContext& ctx);
ParsedRequest parse_completion_request(const Json& body, const WireContext& ctx);

}  // namespace dg::server
