// SessionPool: the server's KV caches. Each slot is a Session (a cache and the token log it holds); a request
// goes to the slot whose log shares the longest prefix with its prompt, so a conversation that comes back finds
// its history already encoded and only the new turn is prefilled (a divergence is cut by Session::sync's rewind).
// A slot is reused only when it keeps at least as many tokens as it cuts; otherwise the prompt takes an empty
// slot, then the least recently used one. Slots belong to the tenant that last used them (an API key, a `user`):
// a prompt reuses only its own tenant's cache, and a slot taken over from another tenant is cleared first, so no
// request learns from its cached tokens (or its latency) what another tenant sent. A slot whose last answer called
// tools keeps that tool turn (chat/tool_turn.h) until a job next runs on it: the request that continues it goes
// there first. Routing is pure; the worker holds the slots (a batched worker marks the ones in flight busy).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "chat/tool_turn.h"
#include "engine/engine_core.h"

namespace dg {

struct Route {
  int slot = -1;
  int64_t common = 0;  // tokens the slot's log shares with the prompt
  int64_t held = 0;    // tokens the slot held before
  std::string why;     // "tool_turn" | "prefix" | "empty" | "evict": how the slot was chosen
  bool clear = false;  // the slot holds another tenant's tokens: clear it before use (common is then 0)
};

// The length of the longest common prefix.
int64_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b);

class SessionPool {
 public:
  SessionPool(const EngineCore& engine, int slots, const SessionOptions& opt);

  // The slot for `prompt` among those not busy; slot -1 when every slot is busy. A prefix counts when it is more
  // than `min_common` tokens (the <bos> every chat shares is not worth keeping a slot for).
  // Only slots of `tenant` count for a prefix.
  Route route(std::span<const int32_t> prompt, const std::string& tenant = "", int64_t min_common = 1) const;
  Session& session(int slot) { return *slots_.at(static_cast<size_t>(slot)).session; }
  const Session& session(int slot) const { return *slots_.at(static_cast<size_t>(slot)).session; }
  // The first free slot of `tenant` holding a tool turn that `continues` accepts; -1 when there is none.
  int tool_turn_slot(const std::string& tenant, const std::function<bool(const ToolTurn&)>& continues) const;
  // Busy until release; most recently used; owned by tenant; its tool turn is dropped (the job settles it anew).
  void acquire(int slot, const std::string& tenant = "");
  void release(int slot);
  void set_tool_turn(int slot, std::optional<ToolTurn> turn);  // the tool turn the slot's cache now ends in
  // The free slot as at start: its cache empty, no tenant, no tool turn, least recently used.
  void reset(int slot);
  int size() const { return static_cast<int>(slots_.size()); }

 private:
  struct Slot {
    std::unique_ptr<Session> session;
    std::string tenant;
    uint64_t last_used = 0;
    bool busy = false;
    std::optional<ToolTurn> tool_turn;
  };
  std::vector<Slot> slots_;
  uint64_t clock_ = 0;
};

}  // namespace dg
