#include "engine/tool_repair.h"

#include <algorithm>

#include <fmt/format.h>

#include "chat/id_writer.h"
#include "chat/tools_render.h"
#include "core/error.h"

namespace dg {
namespace {

struct Attempt {
  TurnResult turn;
  std::vector<ReplyEvent> events;  // held until the attempt is the one handed on
  std::vector<ToolProblem> problems;
};

Json problems_json(const std::vector<ToolProblem>& ps) {
  Json j = Json::array();
  for (const ToolProblem& p : ps) j.push_back({{"name", p.name}, {"message", p.message}});
  return j;
}

// The first attempt, handed on as a failure: its text as it came, every call (valid or not) as an error with its
// raw text, so nothing is dropped and nothing can be run.
void fail_attempt(Attempt& a, const Tokenizer& tok, const ChatTokens& t) {
  Reply& r = a.turn.reply;
  std::vector<ToolCallError> errors;
  for (const ToolProblem& p : a.problems) errors.push_back({p.raw, p.message});
  for (const ToolCall& c : r.tool_calls) {
    const std::string raw = call_text(c, tok, t);
    const bool listed = std::any_of(a.problems.begin(), a.problems.end(),
                                    [&](const ToolProblem& p) { return p.raw == raw; });
    if (!listed) errors.push_back({raw, "not run: another call of this reply is invalid"});
  }
  r.tool_calls.clear();
  r.errors = errors;
  a.turn.finish = "tool_error";
  std::vector<ReplyEvent> kept;
  for (ReplyEvent& e : a.events)
    if (e.kind == ReplyEvent::Kind::kContent || e.kind == ReplyEvent::Kind::kReasoning) kept.push_back(std::move(e));
  for (const ToolCallError& e : errors) {
    ReplyEvent ev;
    ev.kind = ReplyEvent::Kind::kToolError;
    ev.error = e;
    kept.push_back(std::move(ev));
  }
  a.events = std::move(kept);
}

}  // namespace

std::vector<int32_t> tool_feedback(const std::vector<ToolProblem>& problems, const Tokenizer& tok,
                                   const ChatTokens& t) {
  IdWriter w(tok, t);
  for (const ToolProblem& p : problems)
    render_response(w, p.name.empty() ? "unknown" : p.name, Json{{"error", p.message}});
  return w.take();
}

TurnResult generate_checked_reply(Session& session, const Tokenizer& tok, const ChatTokens& t, const RenderedPrompt& p,
                                  const SamplerOptions& opt, const ToolSet& tools, const ToolCheckOptions& check,
                                  const ChatEvents* ev, Denoiser* denoiser) {
  if (check.mode == ToolCheckMode::kOff || tools.empty()) return generate_reply(session, tok, t, p, opt, ev, denoiser);
  DG_CHECK(check.attempts >= 0 && check.attempts <= 16, "tool check: attempts must be in [0, 16], got {}",
           check.attempts);
  std::vector<ReplyEvent>* sink = nullptr;
  ChatEvents held = ev != nullptr ? *ev : ChatEvents{};
  held.on_reply = [&](const ReplyEvent& e) { sink->push_back(e); };
  auto run = [&](const RenderedPrompt& q, const SamplerOptions& o, std::span<const int32_t> stops) {
    Attempt a;
    sink = &a.events;
    a.turn = generate_reply(session, tok, t, q, o, &held, denoiser, stops);
    if (a.turn.finish != "cancelled") a.problems = tools.check(a.turn.reply, tok, t);
    return a;
  };
  auto note = [&](int attempt, const Attempt& a, const char* outcome) {
    if (ev != nullptr && ev->on_tool_check)
      ev->on_tool_check({{"what", "tool_check"}, {"mode", tool_check_mode_name(check.mode)}, {"attempt", attempt},
                      {"problems", problems_json(a.problems)}, {"outcome", outcome}});
  };

  Attempt first = run(p, opt, {});
  Attempt* chosen = &first;
  Attempt cur;
  std::vector<std::string> seen;
  for (const ToolProblem& pr : first.problems) seen.push_back(pr.message);
  int extra = 0;
  if (!first.problems.empty()) {
    // Repair: the exchange so far (prompt, bad reply, feedback) grows with each attempt; replies are cut at the
    // response opener, which is not a stop token while generating.
    std::vector<int32_t> ctx = p.ids;
    const Attempt* last = &first;
    SamplerOptions repair_opt = opt;
    std::erase(repair_opt.stop_ids, t.response_open);
    for (int k = 1; k <= check.attempts && chosen == &first; ++k) {
      note(k - 1, *last, check.mode == ToolCheckMode::kRetry ? "retry" : "repair");
      ++extra;
      if (check.mode == ToolCheckMode::kRetry) {
        SamplerOptions o = opt;
        o.seed = opt.seed + static_cast<uint64_t>(k);
        cur = run(p, o, {});
      } else {
        ctx.insert(ctx.end(), last->turn.raw.begin(), last->turn.raw.end());
        const std::vector<int32_t> fb = tool_feedback(last->problems, tok, t);
        ctx.insert(ctx.end(), fb.begin(), fb.end());
        RenderedPrompt q{ctx, p.end == PromptEnd::kThought ? PromptEnd::kThought : PromptEnd::kAnswer};
        if (q.end == PromptEnd::kThought) {
          IdWriter w(tok, t);
          w.marker(t.channel_open);
          w.text("thought\n");
          const std::vector<int32_t> open = w.take();
          q.ids.insert(q.ids.end(), open.begin(), open.end());
        }
        cur = run(q, repair_opt, opt.stop_ids);
      }
      for (const ToolProblem& pr : cur.problems) seen.push_back(pr.message);
      if (cur.turn.finish == "cancelled") break;
      if (cur.problems.empty()) chosen = &cur;
      last = &cur;
      if (chosen != &first) note(k, cur, "valid");
    }
    if (check.mode == ToolCheckMode::kRepair) session.rewind(static_cast<int64_t>(p.ids.size()));
    if (chosen == &first) {
      if (cur.turn.finish != "cancelled") {
        note(extra, *last, "failed");
        fail_attempt(first, tok, t);
      } else {
        chosen = &cur;
      }
    }
  }
  const SyncStats prompt = first.turn.prompt;  // how the request's prompt reached the cache
  TurnResult r = std::move(chosen->turn);
  r.prompt = prompt;
  r.tool_attempts = extra;
  r.tool_problems = std::move(seen);
  if (ev != nullptr && ev->on_reply)
    for (const ReplyEvent& e : chosen->events) ev->on_reply(e);
  return r;
}

}  // namespace dg
