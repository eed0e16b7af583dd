#include "engine/session.h"

#include <algorithm>

#include "core/error.h"

namespace dg {

Session::Session(const Model& model, const KvOptions& kv) : model_(model), kv_(model.config(), kv) {}

SyncStats Session::sync(std::span<const int32_t> log, const PrefillProgress& progress) {
  const int64_t vocab = model_.config().vocab;
  for (size_t i = 0; i < log.size(); ++i)
    DG_CHECK(log[i] >= 0 && log[i] < vocab, "token {} at position {} is outside the vocabulary [0, {})", log[i], i,
             vocab);
  model_.check_positions(static_cast<int64_t>(log.size()), "context");  // before the cache changes
  SyncStats st;
  const auto mism = std::mismatch(log_.begin(), log_.end(), log.begin(), log.end());
  int64_t lcp = mism.first - log_.begin();
  const int64_t keep = lcp;
  if (lcp < size()) {
    if (kv_.can_rewind(lcp)) {
      st.rewound = size() - lcp;
      kv_.rewind(lcp);
      log_.resize(static_cast<size_t>(lcp));
    } else {
      st.rewound = size();
      st.reprefilled = true;
      kv_.clear();
      log_.clear();
      lcp = 0;
    }
  }
  st.reused = lcp;
  const std::span<const int32_t> rest = log.subspan(static_cast<size_t>(lcp));
  try {
    if (encoder_) {
      encoder_(kv_, rest);
    } else {
      model_.encode(kv_, rest, nullptr, progress);
    }
  } catch (...) {
    // Chunks (or a chunk's first layers, sliding rings included) may have reached the cache: it is no longer what
    // the log says, so both start over and the next sync encodes the whole log.
    clear();
    throw;
  }
  log_.insert(log_.end(), rest.begin(), rest.end());
  st.encoded = static_cast<int64_t>(rest.size());
  if (observer_ != nullptr) observer_->synced(*this, keep, log.subspan(static_cast<size_t>(keep)), st);
  return st;
}

GenerateResult Session::generate(const SamplerOptions& opt, const GenerateEvents* events) {
  ModelDenoiser d(model_);
  return generate(d, opt, events);
}

GenerateResult Session::generate(Denoiser& denoiser, const SamplerOptions& opt, const GenerateEvents* events) {
  DG_CHECK(kv_.len() > 0, "generate: the session is empty (sync a prompt first)");
  const int64_t before = kv_.len();
  GenerateEvents observed;
  if (observer_ != nullptr) {
    observer_->generating(*this, opt);
    if (events != nullptr) observed = *events;
    observed.step_rows = events != nullptr && events->step_rows;
    const GenerateEvents* caller = events;
    observed.on_block = [this, caller](const BlockInfo& b, std::span<const int32_t> ids) {
      observer_->committed(*this, b, ids);
      if (caller != nullptr && caller->on_block) caller->on_block(b, ids);
    };
    events = &observed;
  }
  GenerateResult res = dg::generate(denoiser, kv_, {}, opt, events);
  const int64_t encoded = kv_.len() - before;
  DG_CHECK(encoded >= 0 && encoded <= static_cast<int64_t>(res.committed.size()),
           "generate encoded {} tokens but committed {}", encoded, res.committed.size());
  log_.insert(log_.end(), res.committed.begin(), res.committed.begin() + encoded);
  if (observer_ != nullptr) observer_->generated(*this, res);
  return res;
}

SyncStats Session::rewind(int64_t n_tokens) {
  DG_CHECK(n_tokens >= 0 && n_tokens <= size(), "cannot rewind to {} tokens: the session holds {}", n_tokens, size());
  const std::vector<int32_t> keep(log_.begin(), log_.begin() + n_tokens);
  return sync(keep);
}

void Session::clear() {
  kv_.clear();
  log_.clear();
  if (observer_ != nullptr) observer_->cleared(*this);
}

}  // namespace dg
