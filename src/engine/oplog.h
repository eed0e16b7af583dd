// The op-log: every engine operation the server's worker performs, as JSONL with token ids (no text), so a field
// session can be re-executed exactly. Records, one per line, in the order the worker ran them:
//   {"op":"open", "version", "content", "model", "backend", "precision", "kv_precision", "attention_topk",
//    "expert_act", "linear_act", "vocab_act", "tokenizer", "context", "slots", "ring_slack"}
//   {"op":"route", "job", "slot", "why", "common", "held", "prompt"}           (the reuse decision; no effect)
//   {"op":"sync", "job", "slot", "keep", "append":[ids], "reused", "encoded", "rewound", "reprefilled", "kv_len"}
//   {"op":"generate", "job", "slot", "sampler":{...}}
//   {"event":"block", "job", "slot", "block", "steps", "ids":[ids], "step_ends":[seconds]}  (each committed block;
//    step_ends: from the block's start to each step's end, the timeline, not replayed)
//   {"event":"end", "job", "slot", "finish", "forwards", "tokens", "kv_len", "kv_fingerprint", "graphs"}
//    (graphs: the backend's graph captures, instantiations and in-place updates while the generation ran, with their
//    host seconds; every sequence's in a batched worker; not replayed)
//   {"op":"clear", "job", "slot"}                                             (after an engine error)
//   {"op":"note", "job", "slot", "what", ...}                                  (a decision; no effect: tool checks)
// A sync's target is the slot's first `keep` tokens followed by `append`. A generation the worker cancelled ends
// with finish "cancelled" after `forwards` denoise steps; replay cancels it at the same step.
// The token ids are the conversations themselves (the model's tokenizer decodes them verbatim): the file is created
// readable by its owner only (0600). Written without content, `append` and `ids` are replaced by their lengths
// (`append_count`, `ids_count`), the open record says "content": false, and the log cannot be replayed.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "chat/conversation.h"
#include "diffusion/options.h"
#include "engine/engine_core.h"

namespace dg {

class OpLog {
 public:
  // Creates (or appends to) `path`, mode 0600; throws dg::Error when it cannot. `content` false: token ids are
  // written as counts.
  explicit OpLog(const std::string& path, bool content = true);
  ~OpLog();
  OpLog(const OpLog&) = delete;
  OpLog& operator=(const OpLog&) = delete;
  // One line, written through (a crash keeps every record before it), with "t": seconds since the log was opened
  // (steady clock, to the microsecond), so a log also says where a request's time went.
  void write(Json record);
  const std::string& path() const { return path_; }
  bool content() const { return content_; }

 private:
  std::mutex mu_;
  std::string path_;
  bool content_ = true;
  int fd_ = -1;
  std::chrono::steady_clock::time_point opened_ = std::chrono::steady_clock::now();
};

// The first record of a log: what replay needs to open the same engine and sessions.
Json oplog_open_record(const EngineCore& engine, int slots, int64_t ring_slack, bool content = true);

// Records one session's ops: every sync, generation, committed block and clear. The `chat` and `ask` logs number
// their generations from 1 (syncs carry the last number); the server's worker gives every record of a job the job's
// number, however many generations it runs (a checked tool reply may run several).
class SessionRecorder final : public SessionObserver {
 public:
  explicit SessionRecorder(OpLog& log, int slot = 0) : log_(log), slot_(slot) {}
  SessionRecorder(OpLog& log, int slot, int64_t job) : log_(log), slot_(slot), job_(job), fixed_job_(true) {}
  void synced(const Session& s, int64_t keep, std::span<const int32_t> append, const SyncStats& st) override;
  void generating(const Session& s, const SamplerOptions& opt) override;
  void committed(const Session& s, const BlockInfo& b, std::span<const int32_t> ids) override;
  void generated(const Session& s, const GenerateResult& res) override;
  void cleared(const Session& s) override;
  void note(Json record);  // adds "op":"note", job and slot
  OpLog& log() { return log_; }

 private:
  OpLog& log_;
  int slot_;
  int64_t job_ = 0;
  bool fixed_job_ = false;
  GraphStats graphs_at_start_;  // the backend's graph work when the generation began (the end record's "graphs")
};

// Creates `dir` and any missing parent, each readable by its owner only (0700); a directory that exists is left
// as it is. Throws dg::Error when it cannot.
void create_private_dirs(const std::string& dir);

Json sampler_to_json(const SamplerOptions& o);
// Throws dg::Error naming a missing or mistyped field. A JSON-mode record ("json_object": true) takes `json` as its
// vocabulary table and throws without one.
SamplerOptions sampler_from_json(const Json& j, std::shared_ptr<const JsonVocab> json = nullptr,
                                 std::shared_ptr<const JsonVocab> calls = nullptr);

struct ReplayReport {
  int64_t records = 0, jobs = 0, blocks = 0;
  bool diverged = false;
  std::string divergence;  // the first difference: record line, job, slot, what was expected and what came
};

// Re-executes an op-log on `engine` (opened with the log's backend and precision for fingerprints to compare)
// and stops at the first divergence. Throws dg::Error on an unreadable or malformed log.
ReplayReport replay_oplog(const EngineCore& engine, const std::string& path);

}  // namespace dg
