// ServerOptions: every knob of `diffgemma serve` (src/cli/cmd_serve.cpp declares the flags).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tool_check.h"

namespace dg::server {

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback unless asked otherwise
  int port = 8080;                 // 0: any free port (printed at start)
  // None: no authentication; else every route but /health needs "Bearer KEY" with one of them, and each key is a
  // tenant of its own (its requests never reuse another key's KV cache).
  std::vector<std::string> api_keys;
  bool prefix_reuse = true;        // false: no request reuses another's KV cache (every prompt is encoded whole)
  int64_t context = 8192;          // prompt + answer tokens one request may use
  int max_batch = 0;               // jobs denoised together in one batched forward (0: as many as memory allows)
  int slots = 0;                   // resident sessions (KV caches) for prefix reuse (0: the batch, at least 4)
  double memory_gib = 0;           // memory the streams may fill (0: what the backend reports free)
  int64_t prefill_per_step = 4096;  // batched worker: prompt tokens encoded per round, the waiting prompts together
  size_t max_queue = 64;           // waiting requests beyond which new ones get 429
  double timeout_s = 600;          // per request, from arrival to the last event
  int max_steps = 128;             // denoising steps per block one request may ask for (then 400)
  int64_t max_tokens = 0;          // answer tokens one request may ask for (0: the context; then 400)
  size_t max_body_bytes = 4u << 20;  // larger request bodies get 413, whatever their transfer encoding
  int http_threads = 0;            // 0: max_queue + 16 (a waiting or streaming request holds one thread)
  double header_timeout_s = 10;    // a whole request head (then 408); an idle connection is closed after this too
  double body_timeout_s = 60;      // a whole request body, from the end of its head (then 408)
  int max_connections = 1024;      // open connections in total
  int max_connections_per_peer = 256;  // open connections from one IP address (0: no bound)
  std::vector<std::string> allowed_hosts;  // Host names answered besides IP addresses and localhost ("*": any)
  std::string log_dir;             // "": no op-log; else DIR/ops-<time>-<pid>.jsonl (0600 in a 0700 directory)
  bool log_content = true;         // false: the op-log holds token counts, not token ids (and cannot be replayed)
  std::string model_id;            // the id /v1/models lists and responses carry ("": the directory's name)
  bool allow_special_literals = false;  // chat text holding a special-token literal: 400, or plain text
  // A reply whose tool calls are malformed or fail the declared schemas: handed on, retried or repaired (a request's
  // `tool_check` / `tool_attempts` choose otherwise; engine/tool_repair.h).
  ToolCheckOptions tool_check;
  bool tool_continuation = true;  // a request continuing a tool turn extends its raw token log (chat/tool_turn.h)
};

}  // namespace dg::server
