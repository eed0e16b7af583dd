// The golden path matrix: fixed conversations through the production chat session — a plain turn, a thinking turn,
// a tool call answered and continued, a rewind and the same turn again, prefix reuse across turns, a conversation
// whose sliding-window rings wrap (and a rewind past them that re-prefills), a batched run — each pinned by the
// token ids it generated and the KV cache's length and fingerprint at every checkpoint. A refactor that changes any
// byte fails it; a deliberate change re-blesses the file (`diffgemma golden --bless`). docs/TOOLS.md, "The gates".
#pragma once

#include <string>
#include <vector>

#include "chat/conversation.h"
#include "engine/engine_core.h"

namespace dg {

// {"version":1, "backend", "cases":[{"name", "checkpoints":[{"what", "ids":[...], "kv_len", "kv_fingerprint", ...}]}]}
// `only`: the case names to run (empty: all).
Json run_golden(const EngineCore& engine, const std::vector<std::string>& only = {});

// Every difference between a run and the blessed file, case by case ("ring_wrap checkpoint 2 (turn 3): kv_len
// 41 != 40"); empty when identical.
std::vector<std::string> compare_golden(const Json& got, const Json& want);

std::vector<std::string> golden_case_names();

// The results as the blessed file holds them: one line per checkpoint, so a re-bless reads as a small diff.
std::string golden_text(const Json& results);

// The blessed file of a backend, relative to the source tree: tests/fixtures/golden/cpu.json for the CPU reference;
// on a GPU backend one file per device model, tests/fixtures/golden/<backend>-<device>.json (`device` the backend's
// device_name() in lower case, runs of other characters as one '-': cuda-nvidia-h200.json), since the library
// products choose their algorithms, and so may move last bits, per card. Each backend and card pins its own bytes.
std::string golden_file(const std::string& backend, const std::string& device);

}  // namespace dg
