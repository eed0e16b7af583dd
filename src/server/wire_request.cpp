#include "server/wire_request.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "chat/json_depth.h"
#include "chat/template.h"
#include "core/error.h"
#include "diffusion/json_schema.h"
#include "diffusion/sampler_settings.h"

namespace dg::server {
namespace {

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiError(400, message, "invalid_request_error", "invalid_value", param);
}

// A value within the field's range but over what this server lets one request spend.
[[noreturn]] void over_limit(const std::string& param, int64_t value, int64_t limit, const char* option,
                             const char* what) {
  throw ApiError(400,
                 fmt::format("'{}' is {}; this server allows at most {} {} per request ({})", param, value, limit,
                             what, option),
                 "invalid_request_error", "limit_exceeded", param);
}

// The field, or nullptr when it is absent or null (OpenAI treats null as "not given").
const Json* field(const Json& b, const char* key) {
  const auto it = b.find(key);
  return it == b.end() || it->is_null() ? nullptr : &*it;
}

// `parent`: the object field that holds `key`; the error names the field by its path, param and message
// ('stream_options.include_usage', as the Responses API's 'reasoning.effort').
bool get_bool(const Json& b, const char* key, bool dflt, const char* parent = nullptr) {
  const Json* f = field(b, key);
  if (f == nullptr) return dflt;
  if (!f->is_boolean()) {
    const std::string path = parent != nullptr ? fmt::format("{}.{}", parent, key) : std::string(key);
    bad(path, fmt::format("'{}' must be true or false", path));
  }
  return f->get<bool>();
}

int64_t get_int(const Json& b, const char* key, int64_t lo, int64_t hi, int64_t dflt) {
  const Json* f = field(b, key);
  if (f == nullptr) return dflt;
  double v = 0;
  if (f->is_number_integer()) {
    if (f->is_number_unsigned() && f->get<uint64_t>() > static_cast<uint64_t>(hi))
      bad(key, fmt::format("'{}' must be at most {}", key, hi));
    v = static_cast<double>(f->get<int64_t>());
  } else if (f->is_number_float() && std::floor(f->get<double>()) == f->get<double>()) {
    v = f->get<double>();
  } else {
    bad(key, fmt::format("'{}' must be an integer", key));
  }
  if (v < static_cast<double>(lo) || v > static_cast<double>(hi))
    bad(key, fmt::format("'{}' must be between {} and {} (got {})", key, lo, hi, f->dump()));
  return f->is_number_integer() ? f->get<int64_t>() : static_cast<int64_t>(v);
}

// stop: a string or an array of up to 4 strings.
std::vector<std::string> get_stop(const Json& b) {
  const Json* f = field(b, "stop");
  if (f == nullptr) return {};
  if (f->is_string()) return {f->get<std::string>()};
  if (!f->is_array() || f->size() > 4) bad("stop", "'stop' must be a string or an array of at most 4 strings");
  std::vector<std::string> out;
  for (const Json& s : *f) {
    if (!s.is_string()) bad("stop", "'stop' must be a string or an array of at most 4 strings");
    out.push_back(s.get<std::string>());
  }
  return out;
}

enum class IntegerOf { kInteger, kNotInteger, kBeyond64Bits };

// An integer field as a 64-bit pattern: `wide` when it is at least 2^63 (held in u), else in i. An integral float
// (3.0) counts as its integer; an integer outside [-2^63, 2^64) (the JSON parser holds it as a float) is
// kBeyond64Bits, so the error names the range rather than the type. A float of exactly -2^63 is beyond too: the
// integer literals just below -2^63 round to it, and -2^63 itself is read as an integer, never as a float.
IntegerOf integer_of(const Json& f, int64_t& i, uint64_t& u, bool& wide) {
  wide = false;
  if (f.is_number_unsigned()) {
    u = f.get<uint64_t>();
    wide = u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    i = static_cast<int64_t>(u);
    return IntegerOf::kInteger;
  }
  if (f.is_number_integer()) {
    i = f.get<int64_t>();
    return IntegerOf::kInteger;
  }
  const double d = f.is_number_float() ? f.get<double>() : 0.5;
  if (std::floor(d) != d) return IntegerOf::kNotInteger;  // also NaN and infinities (not JSON anyway)
  if (d <= -0x1p63 || d >= 0x1p64) return IntegerOf::kBeyond64Bits;
  wide = d >= 0x1p63;
  if (wide) u = static_cast<uint64_t>(d);
  i = wide ? 0 : static_cast<int64_t>(d);
  return IntegerOf::kInteger;
}

// A row of the sampler settings table from its request field: an absent (or null) field keeps the value; a wrong
// type or a value outside the row's range is a 400 naming the field. A uint64 (the seed) takes any 64-bit integer,
// a negative one modulo 2^64.
void get_setting(const Json& b, const SamplerSetting& s, SamplerOptions& o) {
  const char* key = s.wire;
  const Json* f = field(b, key);
  if (f == nullptr) return;
  const auto out_of_range = [&] {
    bad(key, fmt::format("'{}' must be {} (got {})", key, setting_range_text(s), f->dump()));
  };
  std::visit(
      [&](auto m) {
        using T = SettingType<decltype(m)>;
        if constexpr (std::is_same_v<T, bool>) {
          if (!f->is_boolean()) bad(key, fmt::format("'{}' must be true or false", key));
          o.*m = f->get<bool>();
        } else if constexpr (std::is_integral_v<T>) {
          int64_t i = 0;
          uint64_t u = 0;
          bool wide = false;
          const IntegerOf kind = integer_of(*f, i, u, wide);
          if (kind == IntegerOf::kNotInteger) bad(key, fmt::format("'{}' must be an integer", key));
          T value{};
          if constexpr (std::is_unsigned_v<T>) {
            if (kind == IntegerOf::kBeyond64Bits)
              bad(key, fmt::format("'{}' must be a 64-bit integer, from {} to {} (got {})", key,
                                   std::numeric_limits<int64_t>::min(), std::numeric_limits<uint64_t>::max(),
                                   f->dump()));
            value = wide ? u : static_cast<uint64_t>(i);
          } else {
            if (kind == IntegerOf::kBeyond64Bits || wide || i < std::numeric_limits<T>::min() ||
                i > std::numeric_limits<T>::max())
              out_of_range();
            value = static_cast<T>(i);
          }
          if (!setting_in_range(s, static_cast<double>(value))) out_of_range();
          o.*m = value;
        } else {
          if (!f->is_number()) bad(key, fmt::format("'{}' must be a number", key));
          if (!setting_in_range(s, f->get<double>())) out_of_range();
          o.*m = f->get<double>();
        }
      },
      s.member);
}

// The sampler: the profile's defaults, then the settings a request may give, and the seed (random when not given).
SamplerOptions get_sampler(const Json& b, const WireContext& ctx) {
  SamplerOptions o = ctx.contract;
  if (const Json* p = field(b, "sampler")) {
    if (!p->is_string() || (*p != "contract" && *p != "reference"))
      bad("sampler", "'sampler' must be \"contract\" or \"reference\"");
    if (*p == "reference") o = ctx.reference;
  }
  for (const SamplerSetting& s : kSamplerSettings)
    if (s.wire != nullptr) get_setting(b, s, o);
  if (o.steps > ctx.max_steps) over_limit("steps", o.steps, ctx.max_steps, "--max-steps", "denoising steps per block");
  if (field(b, "seed") == nullptr) {
    std::random_device rd;
    o.seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
  try {
    o.validate();
  } catch (const Error& e) {
    bad("", e.what());
  }
  return o;
}

// Options shared by both endpoints; the prompt is known, so max_tokens is checked against the context.
void apply_common(const Json& b, const WireContext& ctx, ParsedRequest& r) {
  r.stream = get_bool(b, "stream", false);
  if (const Json* so = field(b, "stream_options")) {
    if (!so->is_object()) bad("stream_options", "'stream_options' must be an object");
    r.include_usage = get_bool(*so, "include_usage", false, "stream_options");
  }
  if (get_int(b, "n", 1, 1, 1) != 1) bad("n", "'n' must be 1");
  if (const Json* lp = field(b, "logprobs"); lp != nullptr && *lp != false && *lp != 0)
    throw ApiError(400, "logprobs are not supported", "invalid_request_error", "unsupported_parameter", "logprobs");
  r.spec.sampler = get_sampler(b, ctx);
  r.spec.stop = get_stop(b);
  r.spec.drafts = get_bool(b, "drafts", false);
  if (const Json* u = field(b, "user")) {
    if (!u->is_string() || u->get_ref<const std::string&>().size() > 256)
      bad("user", "'user' must be a string of at most 256 bytes");
    r.user = u->get<std::string>();
  }

  const auto prompt = static_cast<int64_t>(r.spec.prompt.size());
  if (prompt >= ctx.context)
    throw ApiError(400, fmt::format("the prompt is {} tokens; this server's context holds {}", prompt, ctx.context),
                   "invalid_request_error", "context_length_exceeded", "messages");
  const char* key = field(b, "max_completion_tokens") != nullptr ? "max_completion_tokens" : "max_tokens";
  const int64_t rest = ctx.max_tokens > 0 ? std::min(ctx.context - prompt, ctx.max_tokens) : ctx.context - prompt;
  const int64_t max = get_int(b, key, 1, std::numeric_limits<int32_t>::max(), rest);
  r.spec.max_tokens_given = field(b, key) != nullptr;
  if (ctx.max_tokens > 0 && max > ctx.max_tokens) over_limit(key, max, ctx.max_tokens, "--max-tokens", "answer tokens");
  if (prompt + max > ctx.context)
    throw ApiError(400,
                   fmt::format("this server's context holds {} tokens, but {} were requested ({} in the prompt, {} "
                               "for the answer); lower '{}'",
                               ctx.context, prompt + max, prompt, max, key),
                   "invalid_request_error", "context_length_exceeded", key);
  r.spec.sampler.max_new_tokens = static_cast<int>(max);
}

// Text that would encode a special token if it were matched: refused unless the server allows it (it is then
// encoded as plain text, as every chat text is).
void check_literals(const std::string& text, const std::string& where, const WireContext& ctx) {
  if (ctx.allow_special_literals) return;
  if (const std::optional<int32_t> id = ctx.tok.first_special_literal(text))
    bad(where, fmt::format("{} contains the special-token literal '{}'; control tokens cannot be sent as text "
                           "(start the server with --allow-special-literals to pass such text as plain characters)",
                           where, ctx.tok.token(*id)));
}

// The `thinking` extension field, else vLLM's chat_template_kwargs.enable_thinking, else OpenAI's reasoning_effort
// (low, medium, high: on; minimal, none: off; the Responses API's reasoning.effort arrives here), else off.
bool thinking_of(const Json& b) {
  bool on = false;
  if (const Json* e = field(b, "reasoning_effort")) {
    if (!e->is_string() || (*e != "none" && *e != "minimal" && *e != "low" && *e != "medium" && *e != "high"))
      bad("reasoning_effort", "'reasoning_effort' must be \"none\", \"minimal\", \"low\", \"medium\" or \"high\"");
    on = *e != "none" && *e != "minimal";
  }
  if (const Json* k = field(b, "chat_template_kwargs")) {
    if (!k->is_object()) bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    on = get_bool(*k, "enable_thinking", on, "chat_template_kwargs");
  }
  return get_bool(b, "thinking", on);
}

// tool_check (off | retry | repair) and tool_attempts (0 to 16): what becomes of a reply whose tool calls are
// malformed or fail the declared schemas (engine/tool_repair.h); the server's --tool-check by default.
ToolCheckOptions get_tool_check(const Json& b, const WireContext& ctx) {
  ToolCheckOptions o = ctx.tool_check;
  if (const Json* m = field(b, "tool_check")) {
    if (!m->is_string() || (*m != "off" && *m != "retry" && *m != "repair"))
      bad("tool_check", "'tool_check' must be \"off\", \"retry\" or \"repair\"");
    o.mode = tool_check_mode_from_name(m->get<std::string>());
  }
  o.attempts = static_cast<int>(get_int(b, "tool_attempts", 0, 16, o.attempts));
  return o;
}

struct ResponseFormat {
  std::string type = "text";
  bool json = false;                          // json_object, or json_schema
  std::shared_ptr<const JsonSchema> schema;  // json_schema with a schema
};

// response_format: text, json_object, or json_schema {json_schema: {name, schema, strict}} (the schema compiled;
// a keyword the constraint does not support is a 400 naming it and where it is). A json_schema without a schema is
// JSON mode (any object).
ResponseFormat get_response_format(const Json& b) {
  ResponseFormat f;
  const Json* rf = field(b, "response_format");
  if (rf == nullptr) return f;
  f.type = rf->is_object() && rf->contains("type") && (*rf)["type"].is_string() ? (*rf)["type"].get<std::string>()
                                                                                   : std::string();
  if (f.type != "text" && f.type != "json_object" && f.type != "json_schema")
    bad("response_format", "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
  f.json = f.type != "text";
  if (f.type != "json_schema") return f;
  const Json* js = field(*rf, "json_schema");
  if (js == nullptr || !js->is_object())
    bad("response_format", "response_format json_schema needs a 'json_schema' object ({\"name\": ..., \"schema\": "
                           "{...}})");
  if (const Json* st = field(*js, "strict"); st != nullptr && !st->is_boolean())
    bad("response_format", "'response_format.json_schema.strict' must be true or false");
  const Json* schema = field(*js, "schema");
  if (schema == nullptr) return f;
  try {
    f.schema = JsonSchema::compile(*schema, "response_format.json_schema.schema");
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "invalid_request_error", "unsupported_value", "response_format");
  }
  return f;
}

}  // namespace

Json parse_body(const std::string& body) {
  if (const int depth = json_depth(body); depth > kMaxJsonDepth)
    throw ApiError(400, fmt::format("the request body nests arrays and objects {} levels deep; at most {} are "
                                    "accepted", depth, kMaxJsonDepth),
                   "invalid_request_error", "invalid_json");
  Json j;
  try {
    j = Json::parse(body);
  } catch (const nlohmann::json::parse_error& e) {
    throw ApiError(400, fmt::format("the request body is not valid JSON: {}", e.what()), "invalid_request_error",
                   "invalid_json");
  }
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object", "invalid_request_error",
                                     "invalid_json");
  return j;
}

ParsedRequest parse_chat_request(const Json& b, const WireContext& ctx) {
  ParsedRequest r;
  if (const Json* m = field(b, "model"); m != nullptr && !m->is_string()) bad("model", "'model' must be a string");
  const Json* msgs = field(b, "messages");
  if (msgs == nullptr || !msgs->is_array() || msgs->empty())
    bad("messages", "'messages' must be a non-empty array of chat messages");
  Conversation conv;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const std::string where = fmt::format("messages[{}]", i);
    try {
      conv.messages.push_back(message_from_json((*msgs)[i], where));
    } catch (const Error& e) {
      bad("messages", e.what());
    }
    // The model's own earlier answers may hold such text (it can spell a literal in plain tokens); the rest may not.
    const Message& m = conv.messages.back();
    if (m.role != Role::kAssistant) check_literals(m.content, where + ".content", ctx);
  }
  if (const std::optional<std::string> p = tool_turn_problem(conv.messages)) bad("messages", *p);
  for (const char* legacy : {"functions", "function_call"})  // dropped, the model would never see the functions
    if (field(b, legacy) != nullptr)
      throw ApiError(400, fmt::format("'{}' (OpenAI's deprecated function calling) is not supported: declare "
                                      "functions in 'tools' ({{\"type\": \"function\", \"function\": {{...}}}})",
                                      legacy),
                     "invalid_request_error", "unsupported_parameter", legacy);
  std::string choice = "auto";
  if (const Json* tc = field(b, "tool_choice")) {
    if (!tc->is_string() || (*tc != "auto" && *tc != "none"))
      throw ApiError(400, "tool_choice must be \"auto\" or \"none\": forcing a call needs constrained decoding, "
                          "which this server does not do", "invalid_request_error", "unsupported_value", "tool_choice");
    choice = tc->get<std::string>();
  }
  if (const Json* tools = field(b, "tools"); tools != nullptr && choice != "none") {
    try {
      r.spec.tools = ToolSet::from(*tools);  // a strict function's schema must compile: 400 naming the keyword
    } catch (const Error& e) {
      bad("tools", e.what());
    }
    conv.tools = *tools;
  }
  r.spec.tool_check = get_tool_check(b, ctx);
  const ResponseFormat format = get_response_format(b);
  r.spec.kind = JobSpec::Kind::kChat;
  r.spec.render.thinking = thinking_of(b);
  if (format.json && !conv.tools.is_null() && !conv.tools.empty())
    throw ApiError(400, fmt::format("response_format {} cannot be combined with tools: the answer must be one JSON "
                                    "object, a tool call is not (drop the tools or send tool_choice \"none\")",
                                    format.type),
                   "invalid_request_error", "unsupported_value", "response_format");
  if (format.json && r.spec.render.thinking)
    throw ApiError(400, fmt::format("response_format {} cannot be combined with thinking: the JSON constraint starts "
                                    "at the first answer token, where a thinking model writes its thought channel "
                                    "(turn thinking off)", format.type),
                   "invalid_request_error", "unsupported_value", "response_format");
  r.spec.render.add_generation_prompt = true;
  RenderedPrompt p;
  try {
    p = render_chat(conv, r.spec.render, ctx.tok, ctx.chat_tokens);
  } catch (const Error& e) {
    bad("messages", e.what());
  }
  if (p.end == PromptEnd::kToolResponse)
    bad("messages", "the last assistant message has a tool call without a result: add a role \"tool\" message with "
                    "its tool_call_id");
  r.spec.prompt = std::move(p.ids);
  r.spec.prompt_end = p.end;
  r.spec.conversation = std::move(conv);
  apply_common(b, ctx, r);
  if (r.spec.tools.strict()) {  // a strict tool: the calls are constrained on the canvas
    DG_CHECK(ctx.call_vocab != nullptr, "the server has no tool-call vocabulary table");
    r.spec.sampler.tool_calls = r.spec.tools.call_constraint(ctx.call_vocab, ctx.chat_tokens.call_open);
  }
  if (format.json) {
    DG_CHECK(ctx.json_vocab != nullptr, "the server has no JSON-mode vocabulary table");
    r.spec.sampler.json = ctx.json_vocab;
    r.spec.sampler.json_schema = format.schema;
    // Every token is at least one byte: a budget below the shortest valid object could end before it closes.
    const int shortest = format.schema != nullptr ? format.schema->node(0).min_bytes : 0;
    if (r.spec.sampler.max_new_tokens < shortest) {
      const char* key = field(b, "max_completion_tokens") != nullptr ? "max_completion_tokens" : "max_tokens";
      bad(key, fmt::format("'{}' is {}, below the shortest object the JSON schema allows ({} bytes; a token is at "
                           "least one byte, so the answer could not always close)",
                           key, r.spec.sampler.max_new_tokens, shortest));
    }
  }
  return r;
}

ParsedRequest parse_completion_request(const Json& b, const WireContext& ctx) {
  ParsedRequest r;
  if (const Json* m = field(b, "model"); m != nullptr && !m->is_string()) bad("model", "'model' must be a string");
  if (get_bool(b, "echo", false)) throw ApiError(400, "echo is not supported", "invalid_request_error",
                                                 "unsupported_parameter", "echo");
  if (const Json* s = field(b, "suffix"); s != nullptr && !(s->is_string() && s->get_ref<const std::string&>().empty()))
    throw ApiError(400, "suffix (text to insert before) is not supported: the completion only continues the prompt",
                   "invalid_request_error", "unsupported_parameter", "suffix");
  if (get_int(b, "best_of", 1, 1, 1) != 1) bad("best_of", "'best_of' must be 1");
  const Json* p = field(b, "prompt");
  if (p != nullptr && p->is_array() && p->size() == 1 && (*p)[0].is_string()) p = &(*p)[0];
  std::vector<int32_t> ids;
  const std::optional<int32_t> bos = ctx.tok.bos_id();
  if (p != nullptr && p->is_string()) {
    if (p->get_ref<const std::string&>().empty()) bad("prompt", "'prompt' is empty");
    ids = ctx.tok.encode(p->get<std::string>(), SpecialTokens::kMatch);  // a raw prompt: markers as written
    if (bos && (ids.empty() || ids[0] != *bos)) ids.insert(ids.begin(), *bos);
  } else if (p != nullptr && p->is_array() && !p->empty() && (*p)[0].is_number_integer()) {
    for (const Json& t : *p) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= ctx.tok.vocab_size())
        bad("prompt", fmt::format("prompt token ids must be integers in [0, {})", ctx.tok.vocab_size()));
      ids.push_back(t.get<int32_t>());
    }
  } else {
    bad("prompt", "'prompt' must be a non-empty string, an array of one string, or an array of token ids");
  }
  r.spec.kind = JobSpec::Kind::kCompletion;
  r.spec.prompt = std::move(ids);
  apply_common(b, ctx, r);
  return r;
}

}  // namespace dg::server
