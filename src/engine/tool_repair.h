// Tool-call validation and repair: a reply whose tool calls are malformed or do not match the declared tools
// (engine/tool_check.h) is not handed on as it is. `retry` generates the reply again from the prompt with the seed
// bumped by 1, 2, ...; `repair` is the evaporating draft: after the bad reply the model is fed one error tool
// response per invalid call and generates on to a natural stop (the response opener is not a stop token there; the
// reply is cut at it, so a hallucinated response never counts), then the cache is rewound to the prompt's end, so
// neither the bad exchange nor the feedback stays in the canonical cache. Up to `attempts` more generations; when
// none is valid, the first reply comes back with finish "tool_error" and every call as a ToolCallError holding its
// raw text. The caller sees only the reply it gets: reply events are held until the reply is settled. docs/TOOLS.md.
#pragma once

#include <string>

#include "engine/tool_check.h"
#include "engine/chat.h"

namespace dg {

// generate_reply, checked against `tools` (nothing is checked when `tools` is empty or the mode is off). Every
// option is the request's own (the tools, the mode, the sampler), so one session can serve requests that differ.
// Each decision goes to ev->on_tool_check (the op-log's note); every sync and generation of every attempt is an
// ordinary session operation (a SessionObserver sees them).
TurnResult generate_checked_reply(Session& session, const Tokenizer& tok, const ChatTokens& t, const RenderedPrompt& p,
                                  const SamplerOptions& opt, const ToolSet& tools, const ToolCheckOptions& check,
                                  const ChatEvents* ev = nullptr, Denoiser* denoiser = nullptr);

// The error tool responses fed to the model after an invalid reply (one per problem), as ids.
std::vector<int32_t> tool_feedback(const std::vector<ToolProblem>& problems, const Tokenizer& tok, const ChatTokens& t);

}  // namespace dg
