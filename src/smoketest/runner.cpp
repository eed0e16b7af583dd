#include "smoketest/runner.h"

#include <algorithm>

#include <fmt/format.h>

#include "chat/template.h"
#include "core/error.h"
#include "engine/chat.h"

namespace dg::smoke {
namespace {

// Where two renders of a prompt first differ, with a few tokens of each from there.
std::string first_difference(const std::vector<int32_t>& got, const std::vector<int32_t>& want, const Tokenizer& tok) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  auto around = [&](const std::vector<int32_t>& ids) {
    const size_t end = std::min(ids.size(), i + 6);
    return i < ids.size() ? tok.decode(std::span<const int32_t>(ids.data() + i, end - i), false) : std::string("(end)");
  };
  return fmt::format("token {} of {}/{}: engine {:?}, battery {:?}", i, got.size(), want.size(), around(got),
                     around(want));
}

RenderOptions render_options(const ChatSession& chat) {
  RenderOptions ro;
  ro.thinking = chat.options().thinking;
  ro.open_thought = chat.options().open_thought;
  return ro;
}

Round turn(ChatSession& chat, bool first, const std::string& user) {
  Round r;
  ChatEvents ev;
  ev.on_block = [&](const BlockInfo& b) { r.blocks.push_back(b); };
  const TurnResult t = first ? chat.user(user, &ev) : chat.generate(&ev);
  r.content = t.reply.content;
  r.reasoning = t.reply.reasoning;
  r.tool_calls = t.reply.tool_calls;
  r.tool_errors = static_cast<int>(t.reply.errors.size());
  r.stop_token = t.reply.stop_token;
  r.tokens = t.tokens;
  r.tool_attempts = t.tool_attempts;
  return r;
}

}  // namespace

StopIds stop_ids(const EngineCore& engine) {
  const ChatTokens t = ChatTokens::from(engine.tokenizer());
  return StopIds{t.turn_close, t.eos, t.response_open};
}

Outcome run_prompt(const EngineCore& engine, const BatteryPrompt& p, const SamplerOptions& opt,
                   const ToolCheckOptions& check) {
  const Tokenizer& tok = engine.tokenizer();
  ChatOptions co;
  co.thinking = p.think;
  co.sampler = opt;
  co.tool_check = check;
  ChatSession chat(engine, co);
  if (!p.tools.empty()) chat.set_tools(p.tools);
  Outcome o;

  if (!p.raw.empty()) {
    Conversation c = chat.conversation();
    Message m;
    m.role = Role::kUser;
    m.content = p.prompt;
    c.messages.push_back(m);
    const std::vector<int32_t> got = render_chat(c, render_options(chat), tok, ChatTokens::from(tok)).ids;
    const std::vector<int32_t> want = tok.encode(p.raw, SpecialTokens::kMatch);
    if (got != want) o.render_error = "prompt: " + first_difference(got, want, tok);
  }
  o.rounds.push_back(turn(chat, true, p.prompt));

  const Round& first = o.rounds.front();
  const StopIds ids = stop_ids(engine);
  if (p.kind != "tool" || first.tool_calls.size() != 1 || first.stop_token != ids.response_open) return o;
  chat.add_tool_result(first.tool_calls[0].id, Json(p.tool_response));
  const bool expected_call = first.tool_calls[0].name == p.call_name && first.tool_calls[0].arguments == p.call_arguments;
  if (o.render_error.empty() && expected_call && !p.continuation_raw.empty()) {
    RenderOptions ro = render_options(chat);
    const std::vector<int32_t> got = render_chat(chat.conversation(), ro, tok, ChatTokens::from(tok)).ids;
    const std::vector<int32_t> want = tok.encode(p.continuation_raw, SpecialTokens::kMatch);
    if (got != want) o.render_error = "after the tool response: " + first_difference(got, want, tok);
  }
  o.rounds.push_back(turn(chat, false, ""));
  return o;
}

void Stats::add(const Round& r) {
  for (const BlockInfo& b : r.blocks) {
    ++blocks;
    steps += b.steps;
    forwards += b.forwards;
    committed += b.kept;
    rerolls += b.rerolls;
    trims += b.trimmed ? 1 : 0;
    pad_gated += b.pad_gated;
    switch (b.stop) {
      case StopRule::kConfident: ++confident; break;
      case StopRule::kPlateau: ++plateau; break;
      case StopRule::kEntropy: ++entropy; break;
      case StopRule::kNone: ++budget; break;
    }
  }
  answer_tokens += r.tokens;
}

}  // namespace dg::smoke
