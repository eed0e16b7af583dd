// Session: one KV cache and the token log of what it holds, for a conversation that grows turn by turn.
// sync(log) makes the cache hold exactly `log`, encoding only what follows the longest common prefix with what it
// holds: a divergence is cut by an O(1) rewind while the sliding-window rings still hold the window before it, and
// by a re-prefill from the log otherwise. generate() continues from the cache; the tokens it encoded (every
// committed block but the last) join the log, so the caller syncs the rendered answer afterwards.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "diffusion/generate.h"
#include "model/forward.h"
#include "model/kv_cache.h"

namespace dg {

struct SessionOptions {
  int64_t ring_slack = 2048;  // sliding-ring slots beyond the window: how far back a rewind stays O(1)
};

struct SyncStats {
  int64_t reused = 0;      // tokens kept from the cache
  int64_t encoded = 0;     // tokens encoded
  int64_t rewound = 0;     // tokens cut from the end of the cache
  bool reprefilled = false;  // the rings could not rewind: the cache was rebuilt from the log
};

class Session;

// Sees every operation of a session as it happens (the op-log's SessionRecorder, src/engine/oplog.h).
class SessionObserver {
 public:
  virtual ~SessionObserver() = default;
  // After a sync: the target was the first `keep` tokens the session held followed by `append`.
  virtual void synced(const Session& s, int64_t keep, std::span<const int32_t> append, const SyncStats& st) = 0;
  virtual void generating(const Session& s, const SamplerOptions& opt) = 0;  // before a generation
  virtual void committed(const Session& s, const BlockInfo& b, std::span<const int32_t> ids) = 0;
  virtual void generated(const Session& s, const GenerateResult& res) = 0;  // after it, the log extended
  virtual void cleared(const Session&) {}
};

class Session {
 public:
  Session(const Model& model, const KvOptions& kv);

  // Throws dg::Error on an id outside the vocabulary or a log beyond the model's positions, before the cache
  // changes; an encode that fails later leaves the session empty (the next sync encodes the whole log).
  // `progress` hears of each prefill chunk of what is encoded (PrefillProgress).
  SyncStats sync(std::span<const int32_t> log, const PrefillProgress& progress = {});
  GenerateResult generate(const SamplerOptions& opt, const GenerateEvents* events = nullptr);
  // The same with another denoiser (one that encodes into this session's model; tests script replies with it).
  GenerateResult generate(Denoiser& denoiser, const SamplerOptions& opt, const GenerateEvents* events = nullptr);
  SyncStats rewind(int64_t n_tokens);  // keeps the first n tokens
  // What sync() encodes with (the batched worker interleaves prefill chunks with other jobs' steps); unset: the
  // model's encode.
  using Encoder = std::function<void(KvCache& kv, std::span<const int32_t> ids)>;
  void set_encoder(Encoder e) { encoder_ = std::move(e); }
  void clear();
  // Every later sync and generation is reported to `o` (nullptr: none); the observer outlives its use.
  void set_observer(SessionObserver* o) { observer_ = o; }

  const std::vector<int32_t>& tokens() const { return log_; }
  int64_t size() const { return static_cast<int64_t>(log_.size()); }
  uint64_t fingerprint() const { return kv_.fingerprint(); }
  uint64_t fingerprint_v1() const { return kv_.fingerprint_v1(); }  // a version-1 op-log's (KvCache::fingerprint_v1)
  const Model& model() const { return model_; }
  const KvCache& cache() const { return kv_; }

 private:
  const Model& model_;
  KvCache kv_;
  std::vector<int32_t> log_;  // log_[i] is the token at cache position i
  Encoder encoder_;
  SessionObserver* observer_ = nullptr;
};

}  // namespace dg
