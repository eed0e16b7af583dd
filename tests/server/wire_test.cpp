// The OpenAI wire layer without HTTP: request parsing (defaults, knobs, limits, the rendered prompt) and the SSE
// encoder (chunk order and fields for content, reasoning, tool calls, drafts, finish, usage, errors).
#include <gtest/gtest.h>

#include "chat/template.h"
#include "server/responses.h"
#include "server/sse.h"
#include "server/wire_request.h"
#include "server_test_util.h"

namespace dg::test {
namespace wire_test {

using server::ApiError;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

server::WireContext wire(int64_t context = 1000) {
  const EngineCore& e = tiny_server_engine();
  static const ChatTokens t = ChatTokens::from(e.tokenizer());
  return server::WireContext{e.tokenizer(), t, e.default_sampler(SamplerProfile::kContract),
                             e.default_sampler(SamplerProfile::kReference), context, false,
                             chat_json_vocab(e.tokenizer(), t, e.default_sampler(SamplerProfile::kContract).stop_ids)};
}

int status_of(const json& body, int64_t context = 1000) {
  try {
    server::parse_chat_request(body, wire(context));
    return 200;
  } catch (const ApiError& e) {
    return e.status;
  }
}

TEST(WireRequest, ChatDefaultsKnobsAndTheRenderedPrompt) {
  const json body = {{"messages", json::array({{{"role", "system"}, {"content", "Be brief."}},
                                               {{"role", "user"}, {"content", json::array({{{"type", "text"},
                                                                                           {"text", "Hi"}}})}}})},
                     {"steps", 5},
                     {"entropy_bound", 0.2},
                     {"sampler", "reference"},
                     {"seed", 11},
                     {"stop", "END"},
                     {"chat_template_kwargs", {{"enable_thinking", true}}}};
  const server::ParsedRequest r = server::parse_chat_request(body, wire());
  EXPECT_EQ(r.spec.kind, JobSpec::Kind::kChat);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.spec.sampler.steps, 5);
  EXPECT_DOUBLE_EQ(r.spec.sampler.entropy_bound, 0.2);
  EXPECT_EQ(r.spec.sampler.profile, SamplerProfile::kReference);
  EXPECT_EQ(r.spec.sampler.seed, 11u);
  EXPECT_EQ(r.spec.stop, std::vector<std::string>{"END"});
  EXPECT_TRUE(r.spec.render.thinking);
  EXPECT_EQ(r.spec.prompt_end, PromptEnd::kThought);
  const Tokenizer& tok = tiny_server_engine().tokenizer();
  RenderOptions ro;
  ro.thinking = true;
  EXPECT_EQ(r.spec.prompt, render_chat(r.spec.conversation, ro, tok, ChatTokens::from(tok)).ids);
  EXPECT_EQ(static_cast<int64_t>(r.spec.sampler.max_new_tokens) + static_cast<int64_t>(r.spec.prompt.size()), 1000)
      << "no max_tokens: the rest of the context";
  const json off = {{"messages", body["messages"]}, {"thinking", false},
                    {"chat_template_kwargs", {{"enable_thinking", true}}}};
  EXPECT_FALSE(server::parse_chat_request(off, wire()).spec.render.thinking) << "the explicit field wins";
  // OpenAI's reasoning_effort turns thinking on and off as the Responses API's reasoning.effort does; a value it
  // does not have is refused, not taken as on.
  const auto effort = [&](const json& e) { return json{{"messages", body["messages"]}, {"reasoning_effort", e}}; };
  EXPECT_TRUE(server::parse_chat_request(effort("high"), wire()).spec.render.thinking);
  EXPECT_FALSE(server::parse_chat_request(effort("minimal"), wire()).spec.render.thinking);
  EXPECT_FALSE(server::parse_chat_request(effort(nullptr), wire()).spec.render.thinking);
  for (const json& e : {json("extreme"), json(5), json(true)}) {
    try {
      server::parse_chat_request(effort(e), wire());
      ADD_FAILURE() << e;
    } catch (const ApiError& err) {
      EXPECT_EQ(err.param, "reasoning_effort") << e;
    }
  }
}

TEST(WireRequest, LimitsAndUnsupportedOptions) {
  const json msgs = json::array({{{"role", "user"}, {"content", "Hi"}}});
  EXPECT_EQ(status_of({{"messages", msgs}, {"max_tokens", 990}}), 400) << "prompt + max_tokens over the context";
  EXPECT_EQ(status_of({{"messages", msgs}, {"max_tokens", 900}}), 200);
  EXPECT_EQ(status_of({{"messages", msgs}, {"n", 1}, {"temperature", 2}, {"unknown", true}}), 200);
  EXPECT_EQ(status_of({{"messages", msgs}, {"response_format", {{"type", "json_object"}}}}), 200);
  EXPECT_EQ(status_of({{"messages", msgs}, {"tool_choice", "none"}, {"tools", "not even an array"}}), 200)
      << "tools are not rendered with tool_choice none";
  EXPECT_EQ(status_of({{"messages", msgs}, {"stop", json::array({"a", "b", "c", "d", "e"})}}), 400);
  // Fields that would change what is generated are refused, not dropped: the deprecated function calling (the model
  // would never see the functions), a completion's suffix and best_of.
  const json fn = json::array({{{"name", "f"}, {"parameters", json::object()}}});
  EXPECT_EQ(status_of({{"messages", msgs}, {"functions", fn}}), 400);
  EXPECT_EQ(status_of({{"messages", msgs}, {"function_call", "auto"}}), 400);
  EXPECT_EQ(status_of({{"messages", msgs}, {"functions", nullptr}}), 200);
  const auto completion_status = [](const json& extra) {
    json body = {{"prompt", "Hello"}, {"max_tokens", 3}};
    body.update(extra);
    try {
      server::parse_completion_request(body, wire());
      return std::string("200");
    } catch (const ApiError& e) {
      return std::to_string(e.status) + " " + e.param;
    }
  };
  EXPECT_EQ(completion_status({{"suffix", " world."}}), "400 suffix");
  EXPECT_EQ(completion_status({{"suffix", ""}}), "200");
  EXPECT_EQ(completion_status({{"best_of", 3}}), "400 best_of");
  EXPECT_EQ(completion_status({{"best_of", 1}}), "200");
  EXPECT_EQ(status_of({{"messages", msgs}, {"seed", "x"}}), 400);
  EXPECT_EQ(status_of({{"messages", msgs}, {"steps", 2.5}}), 400);
  EXPECT_EQ(status_of({{"messages", msgs}, {"steps", 3.0}}), 200);
  EXPECT_EQ(status_of({{"messages", msgs}, {"entropy_bound", -1}}), 400);
  EXPECT_EQ(status_of({{"messages", json::array({{{"role", "assistant"},
                                                  {"tool_calls", json::array({{{"id", "c1"},
                                                                               {"function", {{"name", "f"}}}}})}}})}}),
            400)
      << "a call without its result cannot be answered";
  EXPECT_EQ(status_of({{"model", 3}, {"messages", msgs}}), 400);
}

// Nothing the model cannot take is dropped silently: an image part, a tool call whose result is missing before the
// next turn, a tool result that answers no call.
TEST(WireRequest, ContentTheModelCannotTakeIsRefused) {
  const auto refusal = [](const json& messages) {
    try {
      server::parse_chat_request({{"messages", messages}}, wire());
    } catch (const ApiError& e) {
      EXPECT_EQ(e.param, "messages");
      return std::to_string(e.status) + " " + e.what();
    }
    return std::string("200");
  };
  const json image = {{"role", "user"},
                      {"content", json::array({{{"type", "text"}, {"text", "What is this?"}},
                                               {{"type", "image_url"}, {"image_url", {{"url", "http://x/a.png"}}}}})}};
  std::string e = refusal(json::array({image}));
  EXPECT_EQ(e.rfind("400", 0), 0u) << e;
  EXPECT_NE(e.find("'image_url' part"), std::string::npos) << e;
  EXPECT_NE(e.find("text only"), std::string::npos) << e;

  const json call = {{"role", "assistant"},
                     {"tool_calls", json::array({{{"id", "c1"}, {"type", "function"},
                                                  {"function", {{"name", "f"}, {"arguments", "{}"}}}}})}};
  const json user = {{"role", "user"}, {"content", "never mind"}};
  const json result = {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "42"}};
  e = refusal(json::array({user, call, user}));
  EXPECT_EQ(e.rfind("400", 0), 0u) << e;
  EXPECT_NE(e.find("messages[1] makes 1 tool call(s) but 0 result(s) follow it"), std::string::npos) << e;
  e = refusal(json::array({user, result}));
  EXPECT_EQ(e.rfind("400", 0), 0u) << e;
  EXPECT_NE(e.find("messages[1] is a tool result that follows no tool call"), std::string::npos) << e;
  EXPECT_EQ(refusal(json::array({user, call, result, user})), "200");
}

// A message without its content was rendered as an empty turn: a 400 naming the field, as OpenAI's (only an
// assistant message that carries tool calls may have none), in the chat and the Responses API.
TEST(WireRequest, AMessageWithoutItsContentIsRefusedNamingIt) {
  const auto error = [](const json& body, bool responses = false) -> std::string {
    try {
      if (responses)
        server::parse_responses_request(body, wire());
      else
        server::parse_chat_request(body, wire());
    } catch (const ApiError& e) {
      return fmt::format("{} {}: {}", e.status, e.param, e.what());
    }
    return "200";
  };
  const json user = {{"role", "user"}, {"content", "hi"}};
  const auto chat = [&](const json& messages) { return error({{"messages", messages}}); };
  EXPECT_PRED2(has, chat(json::array({{{"role", "user"}}})), "400 messages: messages[0].content is missing (user");
  EXPECT_PRED2(has, chat(json::array({{{"role", "user"}, {"content", nullptr}}})),
               "400 messages: messages[0].content is missing");
  EXPECT_PRED2(has, chat(json::array({{{"role", "system"}}, user})), "messages[0].content is missing");
  EXPECT_PRED2(has, chat(json::array({user, {{"role", "assistant"}, {"content", nullptr}}, user})),
               "messages[1].content is missing (assistant messages need content unless they carry tool_calls)");
  EXPECT_PRED2(has, chat(json::array({{{"role", "user"}, {"content", json::array({{{"type", "text"}}})}}})),
               "messages[0].content[0].text is missing");
  const json call = {{"role", "assistant"}, {"content", nullptr},
                     {"tool_calls", json::array({{{"id", "c1"}, {"type", "function"},
                                                  {"function", {{"name", "f"}, {"arguments", "{}"}}}}})}};
  EXPECT_EQ(chat(json::array({user, call, {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "42"}}})), "200")
      << "an assistant message with tool calls needs no content";
  EXPECT_EQ(chat(json::array({{{"role", "user"}, {"content", ""}}})), "200") << "an empty text is the client's choice";

  EXPECT_PRED2(has, error({{"input", json::array({{{"role", "user"}}})}}, true),
               "400 input: input[0].content is missing");
  const json no_text = json::array({{{"type", "input_text"}}});
  EXPECT_PRED2(has, error({{"input", json::array({{{"role", "user"}, {"content", no_text}}})}}, true),
               "input[0].content[0].text is missing");
  EXPECT_PRED2(has, error({{"input", json::array({{{"type", "function_call"}, {"call_id", "c1"}, {"name", "f"}},
                                            {{"type", "function_call_output"}, {"call_id", "c1"}}})}},
                    true),
               "input[1]: a function_call_output needs the call's output");
}

// Two tools of one name were both declared: which schema a call meets was left to chance. A 400 naming the name, in
// the chat and the Responses API.
TEST(WireRequest, DuplicateToolNamesAreRefused) {
  const json msgs = json::array({{{"role", "user"}, {"content", "Hi"}}});
  const json f = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  const json g = {{"type", "function"}, {"function", {{"name", "other"}}}};
  try {
    server::parse_chat_request({{"messages", msgs}, {"tools", json::array({f, g, f})}}, wire());
    ADD_FAILURE() << "two tools named get_weather";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "tools");
    EXPECT_PRED2(has, e.what(), "tools[2] declares the function 'get_weather' again (tools[0] declares it)");
  }
  const json r = {{"type", "function"}, {"name", "get_weather"}};
  try {
    server::parse_responses_request({{"input", "Hi"}, {"tools", json::array({r, r})}}, wire());
    ADD_FAILURE() << "two Responses tools named get_weather";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "tools");
    EXPECT_PRED2(has, e.what(), "tools[1] declares the function 'get_weather' again");
  }
  EXPECT_EQ(status_of({{"messages", msgs}, {"tools", json::array({f, g})}}), 200);
}

// A field inside an object is named by its path; an integer beyond 64 bits is refused for its range, not its type.
TEST(WireRequest, NestedFieldsAreNamedByTheirPath) {
  const json msgs = json::array({{{"role", "user"}, {"content", "Hi"}}});
  const std::pair<json, std::string> cases[] = {
      {{{"stream_options", {{"include_usage", 3}}}}, "stream_options.include_usage"},
      {{{"chat_template_kwargs", {{"enable_thinking", "yes"}}}}, "chat_template_kwargs.enable_thinking"}};
  for (const auto& [body, path] : cases) {
    json b = body;
    b["messages"] = msgs;
    try {
      server::parse_chat_request(b, wire());
      ADD_FAILURE() << b;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.param, path);
      EXPECT_EQ(std::string(e.what()), fmt::format("'{}' must be true or false", path));
    }
  }
}

TEST(WireRequest, AnIntegerBeyond64BitsIsRefusedForItsRange) {
  const json msgs = json::array({{{"role", "user"}, {"content", "Hi"}}});
  const auto error = [&](const std::string& field, const std::string& value) -> std::string {
    try {
      server::parse_chat_request(json::parse(R"({"messages": )" + msgs.dump() + ", \"" + field + "\": " + value + "}"),
                                 wire());
    } catch (const ApiError& e) {
      EXPECT_EQ(e.param, field);
      return e.what();
    }
    return "200";
  };
  EXPECT_EQ(error("seed", "18446744073709551615"), "200");
  EXPECT_EQ(error("seed", "-9223372036854775808"), "200");
  EXPECT_PRED2(has, error("seed", "18446744073709551616"),
               "'seed' must be a 64-bit integer, from -9223372036854775808 to 18446744073709551615");
  EXPECT_PRED2(has, error("seed", "-1e30"), "must be a 64-bit integer");
  EXPECT_EQ(error("seed", "1.5"), "'seed' must be an integer");
  EXPECT_PRED2(has, error("steps", "1e30"), "'steps' must be ");
  EXPECT_EQ(error("steps", "1e30").find("an integer"), std::string::npos) << error("steps", "1e30");
}

// An integer literal just below -2^63 is read as the float -2^63 (the nearest double): refused for its range like
// one at 2^64 or above, not taken as -2^63.
TEST(WireRequest, ASeedBelowInt64MinimumIsRefusedForItsRange) {
  const json msgs = json::array({{{"role", "user"}, {"content", "Hi"}}});
  for (const char* value : {"-9223372036854775809", "-9223372036854776000"}) {
    const json body = json::parse(R"({"messages": )" + msgs.dump() + R"(, "seed": )" + value + "}");
    ASSERT_TRUE(body["seed"].is_number_float()) << value;
    try {
      server::parse_chat_request(body, wire());
      ADD_FAILURE() << "seed " << value << " was accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400);
      EXPECT_EQ(e.param, "seed");
      EXPECT_PRED2(has, e.what(),
                   "'seed' must be a 64-bit integer, from -9223372036854775808 to 18446744073709551615");
    }
  }
  const json lowest = json::parse(R"({"messages": )" + msgs.dump() + R"(, "seed": -9223372036854775808})");
  EXPECT_EQ(server::parse_chat_request(lowest, wire()).spec.sampler.seed, uint64_t{1} << 63);
}

TEST(WireRequest, PerRequestWorkIsBoundedAndTheLimitIsNamed) {
  const json msgs = json::array({{{"role", "user"}, {"content", "Hi"}}});
  server::WireContext w = wire();
  w.max_steps = 64;
  w.max_tokens = 100;
  const auto refusal = [&](const json& body) {
    try {
      server::parse_chat_request(body, w);
    } catch (const ApiError& e) {
      return e;
    }
    return ApiError(200, "");
  };
  // The denial of service: many steps per block that an entropy bound near 0 makes the worker take.
  ApiError e = refusal({{"messages", msgs}, {"steps", 4096}, {"entropy_bound", 1e-9}});
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "steps");
  EXPECT_EQ(e.code, "limit_exceeded");
  EXPECT_NE(std::string(e.what()).find("--max-steps"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("64"), std::string::npos) << e.what();
  e = refusal({{"messages", msgs}, {"max_completion_tokens", 101}});
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "max_completion_tokens");
  EXPECT_NE(std::string(e.what()).find("--max-tokens"), std::string::npos) << e.what();
  EXPECT_EQ(refusal({{"messages", msgs}, {"steps", 64}, {"max_tokens", 100}}).status, 200);
  EXPECT_EQ(server::parse_chat_request({{"messages", msgs}}, w).spec.sampler.max_new_tokens, 100)
      << "no max_tokens: the rest of the context, capped by --max-tokens";
}

TEST(WireRequest, ResponsesBodiesBecomeChatRequests) {
  const json input = json::array(
      {{{"role", "user"}, {"content", json::array({{{"type", "input_text"}, {"text", "weather?"}}})}},
       {{"type", "reasoning"}, {"content", json::array({{{"type", "reasoning_text"}, {"text", "I will call."}}})}},
       {{"type", "function_call"}, {"call_id", "c1"}, {"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}},
       {{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "18 C"}}});
  const server::ParsedRequest r = server::parse_responses_request(
      {{"instructions", "Be brief."}, {"input", input}, {"max_output_tokens", 7}, {"reasoning", {{"effort", "low"}}},
       {"tools", json::array({{{"type", "function"}, {"name", "get_weather"}}})}},
      wire());
  const std::vector<Message>& m = r.spec.conversation.messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].role, Role::kSystem);
  EXPECT_EQ(m[0].content, "Be brief.");
  EXPECT_EQ(m[1].content, "weather?");
  EXPECT_EQ(m[2].role, Role::kAssistant);
  EXPECT_EQ(m[2].reasoning, "I will call.");
  ASSERT_EQ(m[2].tool_calls.size(), 1u);
  EXPECT_EQ(m[2].tool_calls[0].id, "c1");
  EXPECT_EQ(m[2].tool_calls[0].arguments, json({{"city", "Paris"}}));
  EXPECT_EQ(m[3].role, Role::kTool);
  EXPECT_EQ(m[3].tool_call_id, "c1");
  EXPECT_TRUE(r.spec.render.thinking) << "reasoning.effort low: thinking on";
  EXPECT_EQ(r.spec.sampler.max_new_tokens, 7);
  EXPECT_EQ(r.spec.conversation.tools[0]["function"]["name"], "get_weather");
  try {
    server::parse_responses_request({{"input", "x"}, {"max_output_tokens", 100000}}, wire());
    ADD_FAILURE() << "over the context";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "max_output_tokens") << "the Responses name of the field";
    EXPECT_NE(std::string(e.what()).find("lower 'max_output_tokens'"), std::string::npos) << e.what();
  }
  for (const json& n : {json(-5), json("5")}) {
    try {
      server::parse_responses_request({{"input", "x"}, {"max_output_tokens", n}}, wire());
      ADD_FAILURE() << n;
    } catch (const ApiError& e) {
      EXPECT_EQ(std::string(e.what()).find("'max_tokens'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("'max_output_tokens' must be"), std::string::npos) << e.what();
    }
  }
  // reasoning.effort: one of OpenAI's values (null: not given); an unknown value or type is a 400 naming the field.
  EXPECT_FALSE(server::parse_responses_request({{"input", "x"}, {"reasoning", {{"effort", nullptr}}}}, wire())
                   .spec.render.thinking);
  EXPECT_FALSE(server::parse_responses_request({{"input", "x"}, {"reasoning", {{"effort", "none"}}}}, wire())
                   .spec.render.thinking);
  for (const json& e : {json("extreme"), json(5)}) {
    try {
      server::parse_responses_request({{"input", "x"}, {"reasoning", {{"effort", e}}}}, wire());
      ADD_FAILURE() << e;
    } catch (const ApiError& err) {
      EXPECT_EQ(err.status, 400);
      EXPECT_EQ(err.param, "reasoning.effort") << e;
      EXPECT_NE(std::string(err.what()).find("\"high\""), std::string::npos) << err.what();
    }
  }
}

TEST(WireRequest, CompletionPromptsAddBosOnce) {
  const auto w = wire();
  const auto bos = *w.tok.bos_id();
  const auto r = server::parse_completion_request({{"prompt", "Hello"}, {"max_tokens", 3}}, w);
  ASSERT_FALSE(r.spec.prompt.empty());
  EXPECT_EQ(r.spec.prompt[0], bos);
  const auto r2 = server::parse_completion_request({{"prompt", json::array({"<bos>Hello"})}}, w);
  EXPECT_EQ(r2.spec.prompt, r.spec.prompt);
  const auto r3 = server::parse_completion_request({{"prompt", json::array({5, 6, 7})}}, w);
  EXPECT_EQ(r3.spec.prompt, (std::vector<int32_t>{5, 6, 7}));
}

TEST(SseEncoder, ChunksInOrderWithUsageAndDone) {
  server::SseEncoder enc({"chatcmpl-x", 123, "m"}, true, true);
  std::string body = enc.start();
  JobEvent e;
  e.kind = JobEvent::Kind::kReasoning;
  e.text = "think";
  body += enc.encode(e);
  e.kind = JobEvent::Kind::kContent;
  e.text = "hi";
  body += enc.encode(e);
  e.kind = JobEvent::Kind::kToolCall;
  e.call.id = "call_1";
  e.call.name = "f";
  e.call.arguments = {{"a", 1}};
  body += enc.encode(e);
  body += enc.encode(e);
  JobEvent done;
  done.kind = JobEvent::Kind::kDone;
  done.finish = "tool_calls";
  done.usage = Usage{10, 4, 6};
  body += enc.encode(done);
  EXPECT_TRUE(enc.finished());
  EXPECT_EQ(enc.encode(e), "") << "nothing after the end";
  const SseStream st = parse_sse(body);
  ASSERT_TRUE(st.done);
  ASSERT_EQ(st.chunks.size(), 7u);
  EXPECT_EQ(st.chunks[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(st.chunks[1]["choices"][0]["delta"]["reasoning_content"], "think");
  EXPECT_EQ(st.chunks[2]["choices"][0]["delta"]["content"], "hi");
  EXPECT_EQ(st.chunks[3]["choices"][0]["delta"]["tool_calls"][0]["index"], 0);
  EXPECT_EQ(st.chunks[4]["choices"][0]["delta"]["tool_calls"][0]["index"], 1);
  EXPECT_EQ(st.chunks[4]["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
  EXPECT_EQ(st.chunks[5]["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(st.chunks[6]["usage"]["total_tokens"], 14);
  EXPECT_EQ(st.chunks[6]["usage"]["prompt_tokens_details"]["cached_tokens"], 6);
  for (const json& c : st.chunks) EXPECT_EQ(c["id"], "chatcmpl-x");
}

TEST(SseEncoder, AnErrorEndsTheStreamWithoutDone) {
  server::SseEncoder enc({"cmpl-y", 1, "m"}, false, false);
  EXPECT_EQ(enc.start(), "") << "completions have no role chunk";
  JobEvent e;
  e.kind = JobEvent::Kind::kError;
  e.status = 504;
  e.text = "timed out";
  const SseStream st = parse_sse(enc.encode(e));
  EXPECT_FALSE(st.done);
  ASSERT_EQ(st.chunks.size(), 1u);
  EXPECT_EQ(st.chunks[0]["error"]["message"], "timed out");
  EXPECT_EQ(st.chunks[0]["error"]["type"], "timeout_error");
  EXPECT_TRUE(enc.finished());
}

}  // namespace wire_test
}  // namespace dg::test
