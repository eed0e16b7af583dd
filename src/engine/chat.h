// ChatSession: a conversation bound to a Session. Each turn renders the conversation with the Gemma 4 template,
// syncs the cache to it (only what follows the common prefix is encoded), generates, streams the reply through
// ReplyStream, appends the assistant message, and settles the cache on the canonical render of the conversation
// (the answer without its reasoning, the turn closed), so the next turn is a pure extension. Tool-call rounds
// continue inside the model's turn once every call has its result. Used by `diffgemma chat` (REPL and JSONL).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "chat/chat_tokens.h"
#include "chat/conversation.h"
#include "chat/stream.h"
#include "chat/template.h"
#include "engine/tool_check.h"
#include "chat/tool_turn.h"
#include "engine/engine_core.h"
#include "diffusion/json_commit.h"

namespace dg {

class OpLog;
class SessionRecorder;

struct ChatOptions {
  bool thinking = false;
  bool open_thought = true;  // RenderOptions::open_thought
  SamplerOptions sampler;
  SessionOptions session;
  ToolCheckOptions tool_check;  // invalid tool calls: retried or repaired (engine/tool_repair.h)
  // A tool round continues from the raw token log of the reply that called (reasoning intact; chat/tool_turn.h)
  // instead of the re-rendered conversation.
  bool tool_continuation = true;
  Denoiser* denoiser = nullptr;  // what writes the replies: nullptr for the model (tests script replies)
  OpLog* oplog = nullptr;  // every op of the session, when set (open record first; the caller keeps it open)
};

struct ChatEvents {
  std::function<void(const ReplyEvent&)> on_reply;  // text deltas, tool calls (with ids), malformed calls
  std::function<void(const StepInfo&)> on_step;
  std::function<void(const BlockInfo&)> on_block;
  std::function<void(const BlockInfo&, std::span<const int32_t>)> on_commit;  // each committed block's ids
  std::function<void(const StepInfo&, const StepView&)> on_canvas;  // every step's canvas (draft previews)
  std::function<bool()> cancel;  // asked before every denoise step (GenerateEvents::cancel)
  // Each decision of the tool check (engine/tool_repair.h), as the op-log's note record without "op", "job", "slot":
  // {"what":"tool_check", "mode", "attempt", "problems", "outcome"}.
  std::function<void(const Json&)> on_tool_check;
  PrefillProgress on_prefill;    // the prompt's new tokens, chunk by chunk (GenerateEvents::on_prefill)
  std::string call_id_prefix = "call_";  // tool calls are numbered <prefix>0, <prefix>1, ... per reply
};

struct TurnResult {
  Reply reply;                // tool calls carry their ids (call_0, call_1, ... per reply)
  std::string finish;         // "stop" | "length" | "tool_calls" | "cancelled" | "tool_error" (repair failed)
  int tokens = 0;             // answer tokens
  int forwards = 0;           // denoise forwards
  FinishReason generation = FinishReason::kLength;  // how the block loop ended
  SyncStats prompt;           // how the prompt reached the cache
  int64_t kv_tokens = 0;      // cache length once settled
  uint64_t kv_fingerprint = 0;
  std::vector<int32_t> raw;   // the answer's ids as generated, up to (not including) the token that ended it
  int tool_attempts = 0;      // generations after the first spent on invalid tool calls (engine/tool_repair.h)
  std::vector<std::string> tool_problems;  // what the tool check found, every attempt's
};

// One reply to a rendered prompt, generated into `session`: sync (only what follows the common prefix is encoded),
// generate, stream through ReplyStream. The session is left as Session::generate leaves it; kv_tokens and
// kv_fingerprint are not filled (the caller settles the canonical render first). Shared by ChatSession and the
// server's worker.
// `denoiser`: nullptr for the session's model. `reply_stops`: the ids that end the reply as parsed, when they differ
// from the sampler's stop ids (a repair generates past <|tool_response> and cuts the reply there).
TurnResult generate_reply(Session& session, const Tokenizer& tok, const ChatTokens& t, const RenderedPrompt& p,
                          const SamplerOptions& opt, const ChatEvents* ev = nullptr, Denoiser* denoiser = nullptr,
                          std::span<const int32_t> reply_stops = {});
// JSON mode's vocabulary for chat answers: the answer ends with <turn|> once the object has closed; the stop ids
// (and every special token) never appear inside the JSON.
std::shared_ptr<const JsonVocab> chat_json_vocab(const Tokenizer& tok, const ChatTokens& t,
                                                 std::span<const int32_t> stop_ids);
// The vocabulary of a strict tool call's body (ToolSet::call_constraint): <|"|> and <tool_call|> stand as the call
// grammar's bytes; the stop ids and every other special token never appear inside a call.
std::shared_ptr<const JsonVocab> chat_call_vocab(const Tokenizer& tok, const ChatTokens& t,
                                                 std::span<const int32_t> stop_ids);
// The reply as it joins the conversation: the reasoning and the calls; text next to calls is shown but not kept
// (the template would place it after the responses and close the turn).
Message assistant_message(const Reply& r);

class ChatSession {
 public:
  ChatSession(const EngineCore& engine, ChatOptions opt);  // throws dg::Error without a Gemma 4 chat tokenizer
  ~ChatSession();

  // A user turn, then the answer. A turn that leaves no room for an answer within the model's positions
  // (max_position_embeddings) is a dg::Error saying so, and the conversation and its cache stay as they were.
  TurnResult user(const std::string& text, const ChatEvents* ev = nullptr);
  TurnResult generate(const ChatEvents* ev = nullptr);  // the model's next reply to the conversation as it stands
  void add_message(const Message& m);                   // appended as is; the cache follows at the next sync
  void add_tool_result(const std::string& call_id, const Json& content);  // throws if no open call has that id
  std::vector<ToolCall> pending_calls() const;          // the last reply's calls still waiting for a result

  bool rewind();  // drops the last user turn and all after it; false when there is none
  void clear();   // drops every message but the system prompt
  void set_system(const std::string& text);  // "" removes it
  void set_tools(const Json& tools);
  const ToolSet& tools() const { return tools_; }
  void set_thinking(bool on);
  void save(const std::string& path) const;
  void load(const std::string& path);

  // Syncs the cache to the conversation as it stands, without a generation prompt: the canonical render, or during
  // a tool round with continuation the raw tool turn (tool_turn()). A conversation longer than the chat's context
  // (--ctx, or the model's positions) is a dg::Error, as is a failed sync; either way the changes since the last
  // settle (messages, system prompt, tools, thinking) are undone and the cache holds the conversation as it was.
  SyncStats settle();
  const SyncStats& last_sync() const { return last_sync_; }  // the latest settle's (a rewind's, a clear's)
  const std::optional<ToolTurn>& tool_turn() const { return tool_turn_; }
  const Conversation& conversation() const { return conv_; }
  const ChatOptions& options() const { return opt_; }
  ChatOptions& options() { return opt_; }
  int64_t kv_tokens() const { return session_.size(); }
  uint64_t fingerprint() const { return session_.fingerprint(); }
  const Session& session() const { return session_; }

 private:
  RenderedPrompt render(bool generation_prompt) const;
  SamplerOptions sampler();  // the session's sampler with the strict tools' call constraint
  // Throws dg::Error unless a prompt of `tokens` fits the chat's context with `answer` positions left for the reply
  // (a canvas before a generation; none for a settled conversation).
  void check_room(size_t tokens, int64_t answer) const;
  int64_t limit() const;  // the tokens the chat's cache may hold: --ctx, or the model's positions where fewer
  SyncStats sync_conversation();  // settle() without the undo
  // What the cache held at the last settle, to undo a change that does not fit.
  struct Settled {
    Conversation conv;
    bool thinking = false;
    ToolSet tools;
    std::optional<ToolTurn> tool_turn;
  };

  const EngineCore& engine_;
  const Tokenizer& tok_;
  ChatTokens t_;
  ChatOptions opt_;
  Session session_;
  Conversation conv_;
  ToolSet tools_;
  std::shared_ptr<const JsonVocab> call_vocab_;  // built on the first turn with a strict tool
  std::vector<int32_t> call_vocab_stops_;
  std::unique_ptr<SessionRecorder> recorder_;
  std::optional<ToolTurn> tool_turn_;  // the last reply called tools and the cache holds it raw
  std::optional<Settled> settled_;
  SyncStats last_sync_;
};

}  // namespace dg
