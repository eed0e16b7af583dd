// One job on one session, on the worker thread: sync the prompt into the cache (prefix reuse), generate (a chat
// reply checked against the declared tools, retried or repaired: engine/tool_repair.h), stream the answer as
// JobEvents, then (chat) settle the cache on the canonical render of the conversation with the answer, so the
// client's next turn is a pure extension, or, after a reply that called tools, on the raw tool turn
// (chat/tool_turn.h). Every engine op goes to the op-log when there is one (a SessionRecorder on the session).
#include <algorithm>

#include <fmt/format.h>

#include "chat/stop_strings.h"
#include "engine/chat.h"
#include "engine/tool_repair.h"
#include "serving/worker.h"

namespace dg {
namespace {

void push(Job& job, JobEvent::Kind kind, std::string text) {
  JobEvent e;
  e.kind = kind;
  e.text = std::move(text);
  job.events.push(std::move(e));
}

// The job's records in the op-log: every sync and generation the session runs, numbered with the job, for as long
// as the job holds the session.
class JobRecording {
 public:
  JobRecording(const Job& job, Session& s, int slot, OpLog* log) : session_(s) {
    if (log == nullptr) return;
    rec_.emplace(*log, slot, static_cast<int64_t>(job.id));
    s.set_observer(&*rec_);
  }
  ~JobRecording() { session_.set_observer(nullptr); }
  JobRecording(const JobRecording&) = delete;
  JobRecording& operator=(const JobRecording&) = delete;
  void note(const Json& j) {
    if (rec_) rec_->note(j);
  }

 private:
  Session& session_;
  std::optional<SessionRecorder> rec_;
};

// The stop check asked before every denoise step; it also opens the step for the latency histogram, which
// on_step closes. `interrupted` tells a worker stop (client gone, deadline, shutdown) from a matched stop string.
struct StepGate {
  const JobContext& ctx;
  bool stopped = false;  // a stop string matched: end the generation, the answer is complete
  bool interrupted = false;
  Clock::time_point start{};

  bool check() {
    if (stopped) return true;
    if (ctx.stop()) {
      interrupted = true;
      return true;
    }
    start = Clock::now();
    return false;
  }
  void step_done() {
    if (ctx.worker_times_steps) return;
    ctx.stats.step_seconds.observe(std::chrono::duration<double>(Clock::now() - start).count());
    ctx.stats.batch_occupancy.observe(1);
    ++ctx.stats.denoise_steps;
  }
};

// Answers a job whose generation the worker cut short.
void answer_interrupted(Job& job, WorkerStats& stats) {
  JobEvent e;
  e.kind = JobEvent::Kind::kError;
  if (job.cancelled) {
    ++stats.jobs_cancelled;
    e.status = 499;
    e.text = "the client closed the connection";
  } else if (job.expired()) {
    ++stats.jobs_timed_out;
    e.status = 504;
    e.text = "the request timed out before the answer was complete";
  } else {
    e.status = 503;
    e.text = "the server is shutting down";
  }
  job.events.push(std::move(e));
}

void answer_done(Job& job, WorkerStats& stats, JobEvent done) {
  ++stats.jobs_completed;
  stats.prompt_tokens += static_cast<uint64_t>(done.usage.prompt);
  stats.cached_prompt_tokens += static_cast<uint64_t>(done.usage.cached);
  stats.completion_tokens += static_cast<uint64_t>(done.usage.completion);
  done.kind = JobEvent::Kind::kDone;
  job.events.push(std::move(done));
}

// A malformed call as text: what the model wrote between the call markers, its string delimiters as '"' (markers
// are control tokens, never text).
std::string call_text(const std::string& raw, const ChatTokens& t, const Tokenizer& tok) {
  std::string out = raw;
  for (const auto& [id, with] : {std::pair{t.call_open, ""}, std::pair{t.call_close, ""}, std::pair{t.quote, "\""}}) {
    const std::string marker(tok.token(id));
    const std::string by(with);
    if (marker.empty()) continue;
    for (size_t at = out.find(marker); at != std::string::npos; at = out.find(marker, at + by.size()))
      out.replace(at, marker.size(), by);
  }
  return out;
}

void push_draft(Job& job, const Tokenizer& tok, const StepInfo& s, const StepView& v) {
  JobEvent d;
  d.kind = JobEvent::Kind::kDraft;
  d.block = s.block;
  d.step = s.step;
  d.text = tok.decode(v.canvas_out, true);
  job.events.push(std::move(d));
}

}  // namespace

std::optional<ToolTurn> run_chat_job(Job& job, Session& session, int slot, const JobContext& ctx) {
  const JobSpec& spec = job.spec;
  const Tokenizer& tok = ctx.engine.tokenizer();
  const ChatTokens& t = ctx.chat_tokens;
  JobRecording rec(job, session, slot, ctx.oplog);

  StopStrings stops(spec.stop);
  StepGate gate{ctx};
  std::string content;
  std::vector<ToolCall> calls;
  std::vector<ToolCallError> call_errors;
  ChatEvents ev;
  ev.call_id_prefix = spec.call_id_prefix;
  ev.cancel = [&] { return gate.check(); };
  ev.on_step = [&](const StepInfo&) { gate.step_done(); };
  ev.on_tool_check = [&](const Json& j) { rec.note(j); };
  if (spec.drafts) ev.on_canvas = [&](const StepInfo& s, const StepView& v) { push_draft(job, tok, s, v); };
  auto add_content = [&](const std::string& text) {
    std::string out = stops.push(text);
    gate.stopped = stops.stopped();
    if (out.empty()) return;
    content += out;
    push(job, JobEvent::Kind::kContent, std::move(out));
  };
  ev.on_reply = [&](const ReplyEvent& e) {
    if (gate.stopped) return;  // nothing after a stop string reaches the client
    switch (e.kind) {
      case ReplyEvent::Kind::kContent: add_content(e.text); break;
      case ReplyEvent::Kind::kReasoning: push(job, JobEvent::Kind::kReasoning, e.text); break;
      case ReplyEvent::Kind::kToolCall: {
        calls.push_back(e.call);
        JobEvent c;
        c.kind = JobEvent::Kind::kToolCall;
        c.call = e.call;
        job.events.push(std::move(c));
        break;
      }
      case ReplyEvent::Kind::kToolError: {  // the call's text goes to the content: nothing the model wrote is lost
        call_errors.push_back(e.error);
        JobEvent c;
        c.kind = JobEvent::Kind::kToolError;
        c.tool_error = e.error;
        job.events.push(std::move(c));
        add_content(call_text(e.error.raw, t, tok));
        break;
      }
    }
  };
  const RenderedPrompt prompt{spec.prompt, spec.prompt_end};
  const TurnResult r = generate_checked_reply(session, tok, t, prompt, spec.sampler, spec.tools, spec.tool_check,
                                              &ev, ctx.denoiser);
  if (gate.interrupted) {
    answer_interrupted(job, ctx.stats);  // the cache keeps what was encoded; the next sync rewinds it
    return std::nullopt;
  }
  if (!gate.stopped) {
    std::string rest = stops.finish();
    if (!rest.empty()) {
      content += rest;
      push(job, JobEvent::Kind::kContent, std::move(rest));
    }
  }
  Reply reply = r.reply;
  reply.content = content;
  reply.tool_calls = calls;
  reply.errors = call_errors;
  // Calls that cannot be run (malformed, or failing the check when no retry or repair mended them) and no good
  // one: the answer is the calls' text, and the finish says why (unless the token budget cut a call short: then it
  // is "length").
  const bool unrunnable = r.finish == "tool_error" || (!call_errors.empty() && r.finish != "length");
  const std::string finish = !calls.empty() ? "tool_calls" : gate.stopped ? "stop" : unrunnable ? "tool_call_error"
                                                                                                : r.finish;
  Conversation conv = spec.conversation;
  conv.messages.push_back(assistant_message(reply));
  JobEvent done;
  done.finish = finish;
  done.reply = std::move(reply);
  done.usage = Usage{static_cast<int64_t>(spec.prompt.size()), r.tokens, r.prompt.reused, r.tool_attempts};
  answer_done(job, ctx.stats, std::move(done));

  // A reply that called tools and ended on <|tool_response> (as generated, reasoning included) stays in the cache
  // as the model wrote it: the request that brings the results continues it. Any other reply settles on the
  // canonical render (the answer as history renders it, the turn closed): the client's next request, which
  // carries this answer as an assistant message, extends the cache without a rewind.
  const bool raw_ok = std::find(r.raw.begin() + (r.raw.empty() ? 0 : 1), r.raw.end(), t.turn_open) == r.raw.end();
  if (ctx.tool_continuation && !calls.empty() && !gate.stopped && r.reply.stop_token == t.response_open && raw_ok) {
    ToolTurn turn;
    turn.conversation = std::move(conv);
    turn.ids = spec.prompt;
    turn.ids.insert(turn.ids.end(), r.raw.begin(), r.raw.end());
    turn.render = spec.render;
    session.sync(tool_turn_settled(turn, t));
    return turn;
  }
  RenderOptions ro = spec.render;
  ro.add_generation_prompt = false;
  session.sync(render_chat(conv, ro, tok, t).ids);
  return std::nullopt;
}

void run_completion_job(Job& job, Session& session, int slot, const JobContext& ctx) {
  const JobSpec& spec = job.spec;
  const Tokenizer& tok = ctx.engine.tokenizer();
  JobRecording rec(job, session, slot, ctx.oplog);
  const SyncStats st = session.sync(spec.prompt);

  StopStrings stops(spec.stop);
  StreamDecoder dec(tok);
  StepGate gate{ctx};
  std::string text;
  bool stop_token = false;
  size_t fed = 0;
  const auto budget = static_cast<size_t>(std::max(0, spec.sampler.max_new_tokens));
  auto emit = [&](const std::string& s) {
    if (gate.stopped) return;
    std::string out = stops.push(s);
    gate.stopped = stops.stopped();
    if (out.empty()) return;
    text += out;
    push(job, JobEvent::Kind::kContent, std::move(out));
  };
  GenerateEvents ge;
  ge.cancel = [&] { return gate.check(); };
  ge.on_step = [&](const StepInfo& s, const StepView& v) {
    gate.step_done();
    if (spec.drafts) push_draft(job, tok, s, v);
  };
  ge.step_rows = spec.drafts;
  ge.on_block = [&](const BlockInfo&, std::span<const int32_t> ids) {
    for (const int32_t id : ids) {
      if (gate.stopped || stop_token || fed >= budget) break;
      const auto& stops_ids = spec.sampler.stop_ids;
      if (std::find(stops_ids.begin(), stops_ids.end(), id) != stops_ids.end()) {
        stop_token = true;
        break;
      }
      ++fed;
      // <pad>, <bos> and the other control tokens that are not chat markers carry no text.
      const bool control = tok.is_special(id) && !ctx.chat_tokens.is_marker(id);
      if (control || id == spec.sampler.pad_id || id == spec.sampler.bos_id) continue;
      emit(dec.push(id));
    }
  };
  const GenerateResult res =
      ctx.denoiser != nullptr ? session.generate(*ctx.denoiser, spec.sampler, &ge) : session.generate(spec.sampler, &ge);
  if (gate.interrupted) {
    answer_interrupted(job, ctx.stats);
    return;
  }
  emit(dec.flush());
  if (!gate.stopped) {
    std::string rest = stops.finish();
    if (!rest.empty()) {
      text += rest;
      push(job, JobEvent::Kind::kContent, std::move(rest));
    }
  }
  Reply reply;
  reply.content = text;
  JobEvent done;
  done.finish = gate.stopped || res.finish == FinishReason::kStop ? "stop" : "length";
  done.reply = std::move(reply);
  done.usage = Usage{static_cast<int64_t>(spec.prompt.size()), static_cast<int64_t>(res.tokens.size()), st.reused};
  answer_done(job, ctx.stats, std::move(done));
}

}  // namespace dg
