#include "engine/chat.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "chat/json_depth.h"
#include "core/error.h"
#include "diffusion/generate.h"
#include "engine/oplog.h"
#include "engine/tool_repair.h"
#include "io/utf8_lead.h"

namespace dg {

ChatSession::ChatSession(const EngineCore& engine, ChatOptions opt)
    : engine_(engine), tok_(engine.tokenizer()), t_(ChatTokens::from(tok_)), opt_(std::move(opt)),
      session_(engine.open_session(opt_.session)) {
  if (opt_.oplog != nullptr) {
    opt_.oplog->write(oplog_open_record(engine, 1, opt_.session.ring_slack));
    recorder_ = std::make_unique<SessionRecorder>(*opt_.oplog);
    session_.set_observer(recorder_.get());
  }
  settle();
}

ChatSession::~ChatSession() = default;

RenderedPrompt ChatSession::render(bool generation_prompt) const {
  RenderOptions ro;
  ro.thinking = opt_.thinking;
  ro.open_thought = opt_.open_thought;
  ro.add_generation_prompt = generation_prompt;
  return render_chat(conv_, ro, tok_, t_);
}

SyncStats ChatSession::settle() {
  try {
    last_sync_ = sync_conversation();
  } catch (...) {
    if (settled_) {  // the conversation, and so the cache, as the last settle left them
      conv_ = settled_->conv;
      opt_.thinking = settled_->thinking;
      tools_ = settled_->tools;
      tool_turn_ = settled_->tool_turn;
      try {
        sync_conversation();  // a no-op unless the failed sync cleared the cache
      } catch (const Error&) {  // the cache stays cleared: the next settle encodes the conversation again
      }
    }
    throw;
  }
  settled_ = Settled{conv_, opt_.thinking, tools_, tool_turn_};
  return last_sync_;
}

SyncStats ChatSession::sync_conversation() {
  if (const std::optional<std::string> p = tool_turn_problem(conv_.messages, true)) fail("{}", *p);
  if (tool_turn_) {
    // Still the tool round (results may have been added since): the raw turn stays; anything else drops it.
    const std::vector<Message>& was = tool_turn_->conversation.messages;
    bool same = conv_.messages.size() >= was.size() && conv_.tools == tool_turn_->conversation.tools &&
                opt_.thinking == tool_turn_->render.thinking && opt_.open_thought == tool_turn_->render.open_thought;
    for (size_t i = 0; same && i < was.size(); ++i) same = message_to_json(conv_.messages[i]) == message_to_json(was[i]);
    for (size_t i = was.size(); same && i < conv_.messages.size(); ++i) same = conv_.messages[i].role == Role::kTool;
    if (same) {
      const std::vector<int32_t> ids = tool_turn_settled(*tool_turn_, t_);
      check_room(ids.size(), 0);
      return session_.sync(ids);
    }
    tool_turn_.reset();
  }
  const RenderedPrompt p = render(false);
  check_room(p.ids.size(), 0);
  return session_.sync(p.ids);
}

TurnResult ChatSession::user(const std::string& text, const ChatEvents* ev) {
  DG_CHECK(pending_calls().empty(), "the last reply's tool calls are waiting for their results");
  if (const std::optional<size_t> bad = utf8_invalid_offset(text))
    fail("the message is not valid UTF-8 at byte {} of {}; nothing was sent", *bad, text.size());
  Message m;
  m.role = Role::kUser;
  m.content = text;
  const size_t before = conv_.messages.size();
  conv_.messages.push_back(m);
  try {
    return generate(ev);
  } catch (...) {
    // A failed turn leaves the conversation as it was (a failed settle has restored it already).
    if (conv_.messages.size() > before) conv_.messages.resize(before);
    throw;
  }
}

TurnResult generate_reply(Session& session, const Tokenizer& tok, const ChatTokens& t, const RenderedPrompt& p,
                          const SamplerOptions& opt, const ChatEvents* ev, Denoiser* denoiser,
                          std::span<const int32_t> reply_stops) {
  TurnResult r;
  r.prompt = session.sync(p.ids, ev != nullptr ? ev->on_prefill : PrefillProgress{});
  const std::string prefix = ev != nullptr ? ev->call_id_prefix : std::string("call_");
  const std::vector<int32_t> stops = reply_stops.empty() ? opt.stop_ids
                                                         : std::vector<int32_t>(reply_stops.begin(), reply_stops.end());
  ReplyStream stream(tok, t, stops, p.end == PromptEnd::kThought);
  int n_calls = 0;
  auto deliver = [&](std::vector<ReplyEvent> events) {
    for (ReplyEvent& e : events) {
      if (e.kind == ReplyEvent::Kind::kToolCall) e.call.id = fmt::format("{}{}", prefix, n_calls++);
      if (ev != nullptr && ev->on_reply) ev->on_reply(e);
    }
  };
  GenerateEvents ge;
  ge.on_step = [&](const StepInfo& s, const StepView& v) {
    if (ev != nullptr && ev->on_step) ev->on_step(s);
    if (ev != nullptr && ev->on_canvas) ev->on_canvas(s, v);
  };
  ge.step_rows = ev != nullptr && ev->on_canvas != nullptr;
  if (ev != nullptr && ev->cancel) ge.cancel = ev->cancel;
  size_t fed = 0;  // answer tokens streamed: the answer ends at max_new_tokens even inside a block
  const auto budget = static_cast<size_t>(std::max(0, opt.max_new_tokens));
  ge.on_block = [&](const BlockInfo& b, std::span<const int32_t> block) {
    if (ev != nullptr && ev->on_block) ev->on_block(b);
    if (ev != nullptr && ev->on_commit) ev->on_commit(b, block);
    const size_t n = std::min(block.size(), budget - std::min(budget, fed));
    fed += n;
    deliver(stream.push(block.first(n)));
  };
  const GenerateResult res = denoiser != nullptr ? session.generate(*denoiser, opt, &ge) : session.generate(opt, &ge);
  deliver(stream.finish());

  r.reply = stream.reply();
  for (size_t i = 0; i < r.reply.tool_calls.size(); ++i) r.reply.tool_calls[i].id = fmt::format("{}{}", prefix, i);
  r.raw = res.tokens;
  const auto end = std::find_if(r.raw.begin(), r.raw.end(),
                                [&](int32_t id) { return std::find(stops.begin(), stops.end(), id) != stops.end(); });
  r.raw.erase(end, r.raw.end());
  r.tokens = static_cast<int>(reply_stops.empty() ? res.tokens.size() : r.raw.size());
  r.forwards = res.forwards;
  r.generation = res.finish;
  if (!r.reply.tool_calls.empty())
    r.finish = "tool_calls";
  else
    r.finish = finish_name(res.finish);
  return r;
}

std::shared_ptr<const JsonVocab> chat_json_vocab(const Tokenizer& tok, const ChatTokens& t,
                                                 std::span<const int32_t> stop_ids) {
  return JsonVocab::from(tok, stop_ids, t.turn_close);
}

std::shared_ptr<const JsonVocab> chat_call_vocab(const Tokenizer& tok, const ChatTokens& t,
                                                 std::span<const int32_t> stop_ids) {
  return JsonVocab::calls(tok, stop_ids, t.quote, t.call_close, t.response_open);
}

Message assistant_message(const Reply& r) {
  Message a;
  a.role = Role::kAssistant;
  a.reasoning = r.reasoning;
  a.tool_calls = r.tool_calls;
  if (a.tool_calls.empty()) a.content = r.content;
  return a;
}

TurnResult ChatSession::generate(const ChatEvents* ev) {
  const std::vector<ToolCall> pending = pending_calls();
  DG_CHECK(pending.empty(), "tool call '{}' ({}) is waiting for its result", pending.empty() ? "" : pending[0].id,
           pending.empty() ? "" : pending[0].name);
  RenderedPrompt p = render(true);
  if (tool_turn_ && opt_.tool_continuation) {
    RenderOptions ro;
    ro.thinking = opt_.thinking;
    ro.open_thought = opt_.open_thought;
    if (std::optional<RenderedPrompt> q = continue_tool_turn(*tool_turn_, conv_, ro, tok_, t_)) p = std::move(*q);
  }
  const int canvas = engine_.config().canvas;
  check_room(p.ids.size(), canvas);
  ChatEvents noted = ev != nullptr ? *ev : ChatEvents{};
  if (recorder_ != nullptr) noted.on_tool_check = [&](const Json& j) { recorder_->note(j); };
  // The answer within the chat's context, not only the model's positions: the cache then holds the settled turn.
  const SamplerOptions bounded = within_positions(sampler(), static_cast<int64_t>(p.ids.size()), canvas, limit());
  TurnResult r = generate_checked_reply(session_, tok_, t_, p, bounded, tools_, opt_.tool_check, &noted,
                                        opt_.denoiser);
  conv_.messages.push_back(assistant_message(r.reply));
  tool_turn_.reset();
  const bool raw_ok = std::find(r.raw.begin() + (r.raw.empty() ? 0 : 1), r.raw.end(), t_.turn_open) == r.raw.end();
  if (opt_.tool_continuation && !r.reply.tool_calls.empty() && r.reply.stop_token == t_.response_open && raw_ok) {
    ToolTurn turn;
    turn.conversation = conv_;
    turn.ids = p.ids;
    turn.ids.insert(turn.ids.end(), r.raw.begin(), r.raw.end());
    turn.render.thinking = opt_.thinking;
    turn.render.open_thought = opt_.open_thought;
    tool_turn_ = std::move(turn);
  }
  settle();
  r.kv_tokens = session_.size();
  r.kv_fingerprint = session_.fingerprint();
  return r;
}

int64_t ChatSession::limit() const {
  const int64_t positions = engine_.config().max_positions;
  const int64_t context = engine_.options().context;  // the session's cache (the --ctx the chat was started with)
  return positions > 0 && positions <= context ? positions : context;
}

void ChatSession::check_room(size_t tokens, int64_t answer) const {
  const int64_t positions = engine_.config().max_positions;
  const int64_t limit = this->limit();
  const bool by_model = positions > 0 && positions <= engine_.options().context;
  const auto n = static_cast<int64_t>(tokens);
  const std::string holds =
      by_model ? fmt::format("the model takes {} positions (max_position_embeddings in config.json)", limit)
               : fmt::format("this chat's context (--ctx) holds {} tokens", limit);
  const std::string larger =
      by_model ? "" : fmt::format(", or start the chat with a larger --ctx (the model takes up to {})", positions);
  if (answer > 0)
    DG_CHECK(n + answer <= limit,
             "the conversation no longer fits: with its latest message it is {} tokens, and {}, a {}-token canvas "
             "for the answer included, so at most {} fit; clear or rewind the conversation to make room, or send a "
             "shorter message{}",
             n, holds, answer, limit - answer, larger);
  DG_CHECK(n <= limit,
           "the conversation no longer fits: with this change it is {} tokens, and {}; the change was undone (clear "
           "or rewind the conversation to make room{})",
           n, holds, larger);
}

void ChatSession::add_message(const Message& m) { conv_.messages.push_back(m); }

std::vector<ToolCall> ChatSession::pending_calls() const {
  std::vector<ToolCall> open;
  for (size_t i = conv_.messages.size(); i-- > 0;) {
    const Message& m = conv_.messages[i];
    if (m.role == Role::kTool) continue;
    if (m.role != Role::kAssistant) break;
    for (const ToolCall& c : m.tool_calls) {
      bool answered = false;
      for (size_t k = i + 1; k < conv_.messages.size(); ++k)
        answered = answered || conv_.messages[k].tool_call_id == c.id;
      if (!answered) open.push_back(c);
    }
    break;
  }
  return open;
}

void ChatSession::add_tool_result(const std::string& call_id, const Json& content) {
  for (const ToolCall& c : pending_calls()) {
    if (c.id != call_id) continue;
    Message m;
    m.role = Role::kTool;
    m.tool_call_id = c.id;
    m.name = c.name;
    if (content.is_string())
      m.content = content.get<std::string>();
    else
      m.response = content;
    conv_.messages.push_back(m);
    return;
  }
  fail("no tool call '{}' is waiting for a result", call_id);
}

bool ChatSession::rewind() {
  for (size_t i = conv_.messages.size(); i-- > 0;) {
    if (conv_.messages[i].role != Role::kUser) continue;
    conv_.messages.resize(i);
    settle();
    return true;
  }
  return false;
}

void ChatSession::clear() {
  const bool sys = !conv_.messages.empty() && conv_.messages[0].role == Role::kSystem;
  conv_.messages.resize(sys ? 1 : 0);
  settle();
}

void ChatSession::set_system(const std::string& text) {
  const bool sys = !conv_.messages.empty() && conv_.messages[0].role == Role::kSystem;
  if (text.empty()) {
    if (sys) conv_.messages.erase(conv_.messages.begin());
    return;
  }
  Message m;
  m.role = Role::kSystem;
  m.content = text;
  if (sys)
    conv_.messages[0] = m;
  else
    conv_.messages.insert(conv_.messages.begin(), m);
}

SamplerOptions ChatSession::sampler() {
  SamplerOptions o = opt_.sampler;
  if (!tools_.strict()) return o;
  if (call_vocab_ == nullptr || call_vocab_stops_ != o.stop_ids) {
    call_vocab_ = chat_call_vocab(tok_, t_, o.stop_ids);
    call_vocab_stops_ = o.stop_ids;
  }
  o.tool_calls = tools_.call_constraint(call_vocab_, t_.call_open);
  return o;
}

void ChatSession::set_tools(const Json& tools) {
  tools_ = ToolSet::from(tools, opt_.tool_check.strict);
  conv_.tools = tools;
}

void ChatSession::set_thinking(bool on) { opt_.thinking = on; }

void ChatSession::save(const std::string& path) const {
  Json j = {{"format", "diffgemma-chat"}, {"version", 1}, {"thinking", opt_.thinking}, {"tools", conv_.tools}};
  j["messages"] = Json::array();
  for (const Message& m : conv_.messages) j["messages"].push_back(message_to_json(m));
  std::ofstream out(path, std::ios::binary);
  DG_CHECK(out.good(), "cannot write the conversation to '{}'", path);
  out << j.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
  out.close();  // the bytes a full disk refuses are refused here, when the buffer goes out
  DG_CHECK(!out.fail(), "cannot write the conversation to '{}' in full", path);
}

void ChatSession::load(const std::string& path) {
  DG_CHECK(!std::filesystem::is_directory(path), "'{}' is a directory, not a conversation file", path);
  std::ifstream in(path, std::ios::binary);
  DG_CHECK(in.good(), "cannot read the conversation file '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  DG_CHECK(json_depth(ss.view()) <= kMaxJsonDepth, "'{}' nests arrays and objects deeper than {} levels", path,
           kMaxJsonDepth);
  const Json j = Json::parse(ss.str(), nullptr, false);
  DG_CHECK(!j.is_discarded() && j.is_object(), "'{}' is not a JSON object (expected a file written by /save)", path);
  DG_CHECK(j.contains("messages") && j["messages"].is_array(), "'{}' has no \"messages\" array", path);
  Conversation c;
  for (size_t i = 0; i < j["messages"].size(); ++i)
    c.messages.push_back(message_from_json(j["messages"][i], fmt::format("{}: messages[{}]", path, i)));
  if (j.contains("tools") && !j["tools"].is_null()) {
    check_tools(j["tools"]);
    c.tools = j["tools"];
  }
  bool thinking = opt_.thinking;
  if (j.contains("thinking")) {
    DG_CHECK(j["thinking"].is_boolean(), "'{}': \"thinking\" must be true or false", path);
    thinking = j["thinking"].get<bool>();
  }
  ToolSet tools = ToolSet::from(c.tools, opt_.tool_check.strict);
  conv_ = std::move(c);
  opt_.thinking = thinking;
  tools_ = std::move(tools);
  settle();  // a conversation that does not fit is undone there
}

}  // namespace dg
