#include "chat/stream.h"

#include <algorithm>

#include <fmt/format.h>

#include "chat/text.h"
#include "chat/tools_parse.h"

namespace dg {
namespace {

constexpr std::string_view kThoughtLabel = "thought\n";
constexpr std::string_view kModelLabel = "model\n";

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

ReplyStream::ReplyStream(const Tokenizer& tok, const ChatTokens& t, std::vector<int32_t> stop_ids, bool in_thought)
    : tok_(tok), t_(t), stop_ids_(std::move(stop_ids)), content_(tok), reasoning_(tok),
      mode_(in_thought ? Mode::kReasoning : Mode::kContent) {}

void ReplyStream::emit(Mode m, std::string s, std::vector<ReplyEvent>& out) {
  Channel& c = channel(m);
  size_t i = 0;
  if (!c.started) {
    while (i < s.size()) {
      const size_t n = py_space_len(s, i);
      if (n == 0) break;
      i += n;
    }
    if (i == s.size()) return;
    c.started = true;
  }
  size_t last_end = i;
  for (size_t j = i; j < s.size();) {
    const size_t n = py_space_len(s, j);
    if (n > 0) {
      j += n;
    } else {
      j += utf8_len_at(s, j);
      last_end = j;
    }
  }
  if (last_end == i) {
    c.held_ws += s.substr(i);
    return;
  }
  std::string delta = c.held_ws + s.substr(i, last_end - i);
  c.held_ws = s.substr(last_end);
  const bool r = m == Mode::kReasoning;
  (r ? reply_.reasoning : reply_.content) += delta;
  ReplyEvent e;
  e.kind = r ? ReplyEvent::Kind::kReasoning : ReplyEvent::Kind::kContent;
  e.text = std::move(delta);
  out.push_back(std::move(e));
}

void ReplyStream::text(Mode m, std::string s, std::vector<ReplyEvent>& out) {
  if (s.empty()) return;
  Channel& c = channel(m);
  if (!c.expect.empty()) {
    c.label += s;
    if (starts_with(c.label, c.expect)) {
      s = c.label.substr(c.expect.size());
    } else if (starts_with(c.expect, c.label)) {
      return;  // still a prefix of the label: wait
    } else {
      s = c.label;
    }
    c.label.clear();
    c.expect = {};
  }
  emit(m, std::move(s), out);
}

void ReplyStream::close_channel(Mode m, std::vector<ReplyEvent>& out) {
  Channel& c = channel(m);
  text(m, c.dec.flush(), out);
  if (!c.expect.empty()) {
    // An unfinished label at the end of a segment: "thought" alone is the label, anything else was text.
    const bool label = c.label + "\n" == c.expect;
    const std::string held = label ? std::string() : c.label;
    c.label.clear();
    c.expect = {};
    emit(m, held, out);
  }
}

void ReplyStream::end_call(bool closed, const std::string& why, std::vector<ReplyEvent>& out) {
  ReplyEvent e;
  if (closed) {
    const CallParse p = parse_call(std::span<const int32_t>(call_ids_).subspan(1, call_ids_.size() - 2), tok_, t_);
    if (p.ok) {
      e.kind = ReplyEvent::Kind::kToolCall;
      e.call = p.call;
      reply_.tool_calls.push_back(p.call);
      out.push_back(std::move(e));
      call_ids_.clear();
      return;
    }
    e.error.message = p.error;
  } else {
    e.error.message = why;
  }
  e.kind = ReplyEvent::Kind::kToolError;
  e.error.raw = tok_.decode(call_ids_, false);
  reply_.errors.push_back(e.error);
  out.push_back(std::move(e));
  call_ids_.clear();
}

void ReplyStream::step(int32_t id, std::vector<ReplyEvent>& out) {
  const size_t index = seen_++;
  if (mode_ == Mode::kDone) return;
  const bool stop = std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end();
  if (mode_ == Mode::kCall) {
    if (stop) {
      end_call(false, "truncated: the reply stopped inside the tool call", out);
      mode_ = call_return_;
    } else if (id == t_.call_close) {
      call_ids_.push_back(id);
      end_call(true, "", out);
      mode_ = call_return_;
      return;
    } else if (id == t_.call_open) {
      end_call(false, "truncated: a new tool call started before this one closed", out);
      call_ids_.push_back(id);
      return;
    } else if (id != t_.quote && (t_.is_marker(id) || tok_.is_special(id))) {
      end_call(false, fmt::format("truncated: '{}' inside the tool call", tok_.token(id)), out);
      mode_ = call_return_;
    } else {
      call_ids_.push_back(id);
      return;
    }
  }
  if (stop || (id == t_.turn_open && index > 0)) {  // a new turn would start: the reply is over
    close_channel(mode_, out);
    reply_.stop_token = id;
    mode_ = Mode::kDone;
    return;
  }
  if (id == t_.turn_open) {  // a leading "<|turn>model\n" the model wrote itself is absorbed
    channel(mode_).expect = kModelLabel;
    return;
  }
  if (id == t_.channel_open) {
    if (mode_ == Mode::kReasoning) return;
    close_channel(mode_, out);
    mode_ = Mode::kReasoning;
    if (reasoning_.started && reasoning_.held_ws.empty()) reasoning_.held_ws.push_back('\n');  // separate segments
    reasoning_.expect = kThoughtLabel;
    return;
  }
  if (id == t_.channel_close) {
    if (mode_ != Mode::kReasoning) return;  // an orphan close marker
    close_channel(mode_, out);
    mode_ = Mode::kContent;
    return;
  }
  if (id == t_.call_open) {
    close_channel(mode_, out);
    call_return_ = mode_;
    mode_ = Mode::kCall;
    call_ids_.assign(1, id);
    return;
  }
  if (t_.is_marker(id) || tok_.is_special(id)) return;  // other control tokens carry no text
  text(mode_, channel(mode_).dec.push(id), out);
}

std::vector<ReplyEvent> ReplyStream::push(std::span<const int32_t> ids) {
  std::vector<ReplyEvent> out;
  for (int32_t id : ids) step(id, out);
  return out;
}

std::vector<ReplyEvent> ReplyStream::finish() {
  std::vector<ReplyEvent> out;
  if (mode_ == Mode::kCall) {
    end_call(false, "truncated: the output ended inside the tool call", out);
    mode_ = call_return_;
  }
  if (mode_ != Mode::kDone) {
    close_channel(mode_, out);
    mode_ = Mode::kDone;
  }
  return out;
}

Reply parse_reply(std::span<const int32_t> ids, const Tokenizer& tok, const ChatTokens& t,
                  const std::vector<int32_t>& stop_ids, bool in_thought) {
  ReplyStream s(tok, t, stop_ids, in_thought);
  s.push(ids);
  s.finish();
  return s.reply();
}

}  // namespace dg
