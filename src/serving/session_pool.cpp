#include "serving/session_pool.h"

#include <algorithm>

#include "core/error.h"

namespace dg {

int64_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const auto m = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return m.first - a.begin();
}

SessionPool::SessionPool(const EngineCore& engine, int slots, const SessionOptions& opt) {
  DG_CHECK(slots >= 1, "the session pool needs at least one slot (got {})", slots);
  for (int i = 0; i < slots; ++i) slots_.push_back(Slot{std::make_unique<Session>(engine.open_session(opt))});
}

Route SessionPool::route(std::span<const int32_t> prompt, const std::string& tenant, int64_t min_common) const {
  Route best;
  int empty = -1, lru = -1;
  for (int i = 0; i < size(); ++i) {
    const Slot& s = slots_[static_cast<size_t>(i)];
    if (s.busy) continue;
    const int64_t held = s.session->size();
    if (held == 0 && empty < 0) empty = i;
    if (lru < 0 || s.last_used < slots_[static_cast<size_t>(lru)].last_used) lru = i;
    if (s.tenant != tenant) continue;  // another tenant's cache is never a prefix
    const int64_t c = common_prefix(s.session->tokens(), prompt);
    // Worth reusing: more than a shared <bos>, and at least as much kept as cut (a regenerated last turn, not a
    // different conversation under the same system prompt). Ties go to the most recently used slot.
    if (c <= min_common || c < held - c) continue;
    if (best.slot < 0 || c > best.common ||
        (c == best.common && s.last_used > slots_[static_cast<size_t>(best.slot)].last_used)) {
      best.slot = i;
      best.common = c;
    }
  }
  if (best.slot >= 0) {
    best.why = "prefix";
  } else if (empty >= 0) {
    best.slot = empty;
    best.why = "empty";
  } else if (lru >= 0) {
    best.slot = lru;
    best.why = "evict";
    const Slot& s = slots_[static_cast<size_t>(lru)];
    best.clear = s.tenant != tenant && s.session->size() > 0;
    best.common = best.clear ? 0 : common_prefix(s.session->tokens(), prompt);
  } else {
    return best;  // every slot is busy
  }
  best.held = slots_[static_cast<size_t>(best.slot)].session->size();
  return best;
}

int SessionPool::tool_turn_slot(const std::string& tenant,
                                const std::function<bool(const ToolTurn&)>& continues) const {
  for (int i = 0; i < size(); ++i) {
    const Slot& s = slots_[static_cast<size_t>(i)];
    if (!s.busy && s.tenant == tenant && s.tool_turn && continues(*s.tool_turn)) return i;
  }
  return -1;
}

void SessionPool::acquire(int slot, const std::string& tenant) {
  Slot& s = slots_.at(static_cast<size_t>(slot));
  DG_CHECK(!s.busy, "session slot {} is already in use", slot);
  s.busy = true;
  s.last_used = ++clock_;
  s.tenant = tenant;
  s.tool_turn.reset();
}

void SessionPool::release(int slot) { slots_.at(static_cast<size_t>(slot)).busy = false; }

void SessionPool::reset(int slot) {
  Slot& s = slots_.at(static_cast<size_t>(slot));
  DG_CHECK(!s.busy, "session slot {} is in use", slot);
  s.session->clear();
  s.tenant.clear();
  s.last_used = 0;
  s.tool_turn.reset();
}

void SessionPool::set_tool_turn(int slot, std::optional<ToolTurn> turn) {
  slots_.at(static_cast<size_t>(slot)).tool_turn = std::move(turn);
}

}  // namespace dg
