// HttpServer: the HTTP/1.1 transport under the routes (Boost.Beast on one network thread). A request reaches a
// handler only once its head and body are complete: the head within `header_timeout_s` of the connection waiting
// for it, the body within `body_timeout_s` after the head, the body counted against `max_body` as its bytes arrive
// (any transfer encoding). Connections are bounded in total and per peer address; at a bound, the connection that
// has waited longest for a request is closed to make room, so new clients are served while slow ones wait. Quick
// routes are answered on the network thread; the rest run on a fixed pool of handler threads. Each connection
// answers its requests in order (pipelining). docs/SERVER.md, "Security".
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dg::server {

struct HttpRequest {
  std::string method, target, path;  // path: the target without its query
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string remote_addr;
  int remote_port = 0;
  int version = 11;  // 10: HTTP/1.0, 11: HTTP/1.1
  int fd = -1;       // the connection's socket; only for hang-up polls (socket_peer_gone) by a pool handler

  std::string header(std::string_view name) const;  // case-insensitive; "" when absent
};

// Writes one piece of a streamed body; false once the client is gone or the write timed out.
using StreamWrite = std::function<bool(std::string_view)>;

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // Set: the body is streamed (chunked) by this function, on the handler thread, after the head went out.
  std::function<void(const StreamWrite&)> stream;
  bool hang_up = false;  // the client is gone: nothing is written, the connection is closed
  bool close = false;    // close the connection after this response
};

struct HttpLimits {
  size_t max_body = 4u << 20;       // request bodies beyond this get 413 (counted as bytes arrive)
  size_t max_head = 64u << 10;      // request line and headers beyond this get 431
  double header_timeout_s = 10;     // a whole request head, from when the connection waits for it (idle included)
  double body_timeout_s = 60;       // a whole body, from the end of its head
  double write_timeout_s = 30;      // one write to a client that does not read
  int max_connections = 1024;       // open connections in total
  int max_connections_per_peer = 256;  // open connections from one IP address (0: no bound)
  int handler_threads = 80;         // requests handled at once off the network thread
};

struct HttpHandlers {
  // On the network thread, for every complete request: answer it here (cheap routes, refusals) and return true,
  // or return false to run `slow` on a handler thread.
  std::function<bool(const HttpRequest&, HttpResponse&)> quick;
  std::function<void(const HttpRequest&, HttpResponse&)> slow;
  // The answer to what the transport refuses itself, with a code: 400 bad_request, missing_host or repeated_host,
  // 408 request_timeout, 413 body_too_large, 415 unsupported_content_encoding, 417 expectation_failed,
  // 431 head_too_large, 429 server_busy (every handler thread is busy), 501 unsupported_transfer_encoding,
  // 503 too_many_connections, 500 internal_error.
  std::function<HttpResponse(int status, const std::string& message, const std::string& code)> refusal;
  std::function<void(const HttpRequest&, int status)> done;  // each answered request (metrics, access log)
};

struct HttpCounters {
  std::atomic<int64_t> open{0};          // connections open now
  std::atomic<uint64_t> accepted{0};     // connections accepted
  std::atomic<uint64_t> evicted{0};      // closed while waiting for a request, to make room for a new one
  std::atomic<uint64_t> refused{0};      // closed at once: the bound was reached and every connection was busy
  std::atomic<uint64_t> timed_out{0};    // a request head or body not received in time (408), or a write
};

class HttpServer {
 public:
  HttpServer(HttpLimits limits, HttpHandlers handlers);
  ~HttpServer();

  int bind(const std::string& host, int port);  // port 0: any free one; returns the port; throws dg::Error
  void run();   // serves on the calling thread until stop()
  // From any thread: stops accepting, lets responses in progress finish (up to `grace_s`), closes every
  // connection, and makes run() return.
  void stop(double grace_s = 3);
  const HttpCounters& counters() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace dg::server
