// One job on one session, on the worker thread: sync the prompt into the cache (prefix reuse), generate, stream
// the answer as JobEvents, then (chat) settle the cache on the canonical render of the conversation with the
// answer, so the client's next turn is a pure extension. Every engine op goes to the op-log when there is one.
#include <algorithm>

#include <fmt/format.h>

#include "chat/stop_strings.h"
#include "engine/chat.h"
#include "engine/worker.h"

namespace dg {
namespace {

void push(Job& job, JobEvent::Kind kind, std::string text) {
  JobEvent e;
  e.kind = kind;
  e.text = std::move(text);
  job.events.push(std::move(e));
}

SyncStats logged_sync(const Job& job, Session& s, int slot, std::span<const int32_t> target, OpLog* log) {
  const int64_t keep = common_prefix(s.tokens(), target);
  const SyncStats st = s.sync(target);
  if (log != nullptr)
    log->write({{"op", "sync"}, {"job", job.id}, {"slot", slot}, {"keep", keep},
                {"append", std::vector<int32_t>(target.begin() + keep, target.end())}, {"reused", st.reused},
                {"encoded", st.encoded}, {"rewound", st.rewound}, {"reprefilled", st.reprefilled},
                {"kv_len", s.size()}});
  return st;
}

void log_generate(const Job& job, int slot, OpLog* log) {
  if (log != nullptr)
    log->write({{"op", "generate"}, {"job", job.id}, {"slot", slot}, {"sampler", sampler_to_json(job.spec.sampler)}});
}

void log_block(const Job& job, int slot, const BlockInfo& b, std::span<const int32_t> ids, OpLog* log) {
  if (log != nullptr)
    log->write({{"event", "block"}, {"job", job.id}, {"slot", slot}, {"block", b.block}, {"steps", b.steps},
                {"ids", std::vector<int32_t>(ids.begin(), ids.end())}});
}

void log_end(const Job& job, int slot, FinishReason f, int forwards, int tokens, const Session& s, OpLog* log) {
  if (log != nullptr)
    log->write({{"event", "end"}, {"job", job.id}, {"slot", slot}, {"finish", finish_name(f)},
                {"forwards", forwards}, {"tokens", tokens}, {"kv_len", s.size()},
                {"kv_fingerprint", fmt::format("{:016x}", s.fingerprint())}});
}

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

void answer_done(Job& job, WorkerStats& stats, std::string finish, Reply reply, Usage usage) {
  ++stats.jobs_completed;
  stats.prompt_tokens += static_cast<uint64_t>(usage.prompt);
  stats.cached_prompt_tokens += static_cast<uint64_t>(usage.cached);
  stats.completion_tokens += static_cast<uint64_t>(usage.completion);
  JobEvent e;
  e.kind = JobEvent::Kind::kDone;
  e.finish = std::move(finish);
  e.reply = std::move(reply);
  e.usage = usage;
  job.events.push(std::move(e));
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

void run_chat_job(Job& job, Session& session, int slot, const JobContext& ctx) {
  const JobSpec& spec = job.spec;
  const Tokenizer& tok = ctx.engine.tokenizer();
  const SyncStats st = logged_sync(job, session, slot, spec.prompt, ctx.oplog);
  log_generate(job, slot, ctx.oplog);

  StopStrings stops(spec.stop);
  StepGate gate{ctx};
  std::string content;
  std::vector<ToolCall> calls;
  std::vector<ToolCallError> call_errors;
  ChatEvents ev;
  ev.call_id_prefix = spec.call_id_prefix;
  ev.cancel = [&] { return gate.check(); };
  ev.on_step = [&](const StepInfo&) { gate.step_done(); };
  ev.on_commit = [&](const BlockInfo& b, std::span<const int32_t> ids) { log_block(job, slot, b, ids, ctx.oplog); };
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
        add_content(call_text(e.error.raw, ctx.chat_tokens, tok));
        break;
      }
    }
  };
  const TurnResult r = generate_reply(session, tok, ctx.chat_tokens, RenderedPrompt{spec.prompt, spec.prompt_end},
                                      spec.sampler, &ev, ctx.denoiser);
  log_end(job, slot, r.generation, r.forwards, r.tokens, session, ctx.oplog);
  if (gate.interrupted) {
    answer_interrupted(job, ctx.stats);  // the cache keeps what was encoded; the next sync rewinds it
    return;
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
  // A malformed call and no good one: the answer is the call's text, and the finish says why (unless the token
  // budget cut the call short: then it is "length").
  const std::string finish = !calls.empty()                             ? "tool_calls"
                             : gate.stopped                             ? "stop"
                             : !call_errors.empty() && r.finish != "length" ? "tool_call_error"
                                                                        : r.finish;
  Conversation conv = spec.conversation;
  conv.messages.push_back(assistant_message(reply));
  answer_done(job, ctx.stats, finish, std::move(reply),
              Usage{static_cast<int64_t>(spec.prompt.size()), r.tokens, st.reused});

  // The canonical render (the answer as history renders it, the turn closed): the client's next request, which
  // carries this answer as an assistant message, extends the cache without a rewind.
  RenderOptions ro = spec.render;
  ro.add_generation_prompt = false;
  logged_sync(job, session, slot, render_chat(conv, ro, tok, ctx.chat_tokens).ids, ctx.oplog);
}

void run_completion_job(Job& job, Session& session, int slot, const JobContext& ctx) {
  const JobSpec& spec = job.spec;
  const Tokenizer& tok = ctx.engine.tokenizer();
  const SyncStats st = logged_sync(job, session, slot, spec.prompt, ctx.oplog);
  log_generate(job, slot, ctx.oplog);

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
  ge.on_block = [&](const BlockInfo& b, std::span<const int32_t> ids) {
    log_block(job, slot, b, ids, ctx.oplog);
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
  log_end(job, slot, res.finish, res.forwards, static_cast<int>(res.tokens.size()), session, ctx.oplog);
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
  const bool stop = gate.stopped || res.finish == FinishReason::kStop;
  answer_done(job, ctx.stats, stop ? "stop" : "length", std::move(reply),
              Usage{static_cast<int64_t>(spec.prompt.size()), static_cast<int64_t>(res.tokens.size()), st.reused});
}

}  // namespace dg
