// The request side of the device worker: a generation job (token ids in, events out), the bounded queue HTTP
// threads push to and the worker pops from, and the per-job channel the HTTP thread streams events from.
// Pure CPU logic: nothing here touches the model or a KV cache (the worker does, src/serving/worker.h).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "chat/conversation.h"
#include "chat/stream.h"
#include "chat/template.h"
#include "diffusion/options.h"
#include "engine/tool_check.h"

namespace dg {

using Clock = std::chrono::steady_clock;

struct JobSpec {
  enum class Kind : uint8_t { kChat, kCompletion };
  Kind kind = Kind::kChat;
  std::vector<int32_t> prompt;  // the rendered prompt (chat) or the encoded text (completion)
  PromptEnd prompt_end = PromptEnd::kAnswer;
  Conversation conversation;  // chat: the request's messages, to settle the canonical render after the reply
  RenderOptions render;       // chat: how `prompt` was rendered (thinking on or off)
  ToolSet tools;              // chat: the declared tools, compiled: each reply's calls are checked against them
  ToolCheckOptions tool_check;  // chat: what becomes of a reply whose calls fail the check (engine/tool_repair.h)
  SamplerOptions sampler;
  bool max_tokens_given = false;  // the request set the answer budget (else it is the rest of the context)
  std::vector<std::string> stop;  // stop strings: the answer ends before the first one
  bool drafts = false;            // canvas previews after every denoise step
  std::string call_id_prefix = "call_";
  std::string tenant;  // whose KV cache this prompt may reuse (an API key, a `user`; SessionPool)
};

struct Usage {
  int64_t prompt = 0, completion = 0;
  int64_t cached = 0;  // prompt tokens reused from a session's cache
  int tool_attempts = 0;  // generations the tool check added to the answer (retries or repairs; not in `completion`)
};

struct JobEvent {
  enum class Kind : uint8_t { kContent, kReasoning, kToolCall, kToolError, kDraft, kDone, kError };
  Kind kind = Kind::kContent;
  std::string text;  // kContent / kReasoning: the delta; kDraft: the canvas; kError: the message
  ToolCall call;
  ToolCallError tool_error;
  int block = 0, step = 0;  // kDraft
  std::string finish;       // kDone: stop | length | tool_calls | tool_call_error
  Reply reply;              // kDone: the whole answer (a completion's text is reply.content)
  Usage usage;              // kDone
  int status = 500;         // kError: the HTTP status it maps to (504 timeout, 500 engine error, 503 shutdown)
  std::string code;         // kError: the error code when the status's own does not say it ("out_of_memory")
};

// Events from the worker to one HTTP thread. Unbounded: a job emits at most a few events per committed block.
class EventChannel {
 public:
  void push(JobEvent e);
  std::optional<JobEvent> pop(std::chrono::milliseconds wait);  // nullopt when nothing came within `wait`

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<JobEvent> q_;
};

struct Job {
  uint64_t id = 0;
  JobSpec spec;
  Clock::time_point enqueued{}, deadline = Clock::time_point::max();
  std::atomic<bool> cancelled{false};  // the client went away: the job leaves at its next denoise step
  EventChannel events;                 // ends with exactly one kDone or kError

  bool expired() const { return Clock::now() >= deadline; }
};

// Bounded FIFO of waiting jobs (the running ones are not counted).
class JobQueue {
 public:
  explicit JobQueue(size_t capacity) : capacity_(capacity) {}
  bool push(std::shared_ptr<Job> job);  // false when full or closed
  std::shared_ptr<Job> pop();           // blocks; nullptr once closed and empty
  std::shared_ptr<Job> try_pop();       // nullptr when empty now
  void close();                         // later pushes fail; pop drains what is left, then returns nullptr
  size_t size() const;
  size_t capacity() const { return capacity_; }
  bool closed() const;

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> q_;
  bool closed_ = false;
};

}  // namespace dg
