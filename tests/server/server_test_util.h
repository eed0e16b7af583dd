// Shared by the server tests: an in-process Server on a free loopback port (the embedded model, or scripted
// replies), an httplib client, SSE parsing, and the engines (opened once per test binary).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "engine/engine_core.h"
#include "server/server.h"

namespace dg::test {

using nlohmann::json;

const EngineCore& tiny_server_engine();  // models/dg-tiny

struct TestServer {
  // scripted: replies from scripted_denoisers (support/scripted_denoiser.h) instead of the model's noise.
  // warm_up: Server::warm_up before the listener runs.
  explicit TestServer(server::ServerOptions opt = {}, bool scripted = false, bool warm_up = false);
  ~TestServer();

  httplib::Client client() const;
  // POST a JSON body; `headers` adds to Content-Type.
  httplib::Result post(const std::string& path, const json& body, const httplib::Headers& headers = {}) const;
  // POST over a plain socket and read the raw response (headers, chunk framing) as it arrives: `on_data` gets the
  // response so far after each read and returns false to hang up. Returns the response so far.
  std::string stream(const std::string& path, const json& body,
                     const std::function<bool(const std::string&)>& on_data) const;
  std::string metrics() const;
  double metric(const std::string& line_prefix) const;  // the value of the first /metrics line with this prefix

  int port = 0;
  std::unique_ptr<server::Server> srv;
  std::thread thread;
};

// `diffgemma serve` as a child process on a free port; the destructor stops it if the test did not.
struct ServerProcess {
  explicit ServerProcess(const std::string& args);
  ~ServerProcess();
  int stop();           // SIGTERM, then the exit status (-1 when it did not exit normally)
  double rss_mb() const;  // resident memory now
  httplib::Client client() const;

  int pid = -1, port = 0;
  std::string log_path;  // its stderr
};

// The same plain-socket POST against any port.
std::string stream_post(int port, const std::string& path, const json& body,
                        const std::function<bool(const std::string&)>& on_data);

// The raw HTTP/1.1 POST request (Content-Length framing); `close` adds "Connection: close".
std::string raw_post(const std::string& path, const json& body, bool close = true);
// A loopback TCP connection to `port` that has sent `bytes`; -1 when connecting or sending failed.
int connect_and_send(int port, const std::string& bytes);
// Everything `fd` receives until the peer closes (or `seconds` pass without a byte); does not close it.
std::string recv_all(int fd, double seconds = 60);
// All of `bytes` sent on `fd` (false when the peer is gone).
bool send_all(int fd, const std::string& bytes);
// Whether the server closed `fd` (or reset it) within `seconds`; what it sent before is appended to `got`.
bool closed_by_server(int fd, double seconds, std::string* got = nullptr);
// GET /health on a fresh connection: the seconds it took to answer 200, or -1 when it did not within 3 s.
double health_seconds(int port);

// A chat request with small, fast defaults (max_tokens 8, steps 2, a fixed seed) and one user message.
json chat_request(const std::string& user, const json& extra = json::object());
// The chat API's `tools`: one function, get_weather(city: string), city required.
json weather_tools();

struct SseStream {
  std::vector<json> chunks;  // each data: payload but [DONE], parsed
  bool done = false;         // data: [DONE] came last
  std::string raw;
  std::string error;         // set when a payload was not JSON or [DONE] was not last
};
SseStream parse_sse(const std::string& body);

// The value of the first /metrics line that starts with `prefix` (then a space); -1 when there is none.
double metric_value(const std::string& metrics, const std::string& prefix);

// The op-log a ServerProcess run wrote into `dir` (its one file; "" when there is none) and that log's first record.
std::string only_log_in(const std::string& dir);
json open_record_of(const std::string& log);
// `diffgemma replay ARGS LOG` expecting "identical" and exit 0, or "diverged" and exit 1.
void expect_replay(const std::string& log, const std::string& args, bool identical);

// Polls `pred` every 20 ms for up to `seconds`; true once it holds.
bool eventually(const std::function<bool()>& pred, double seconds = 30);

}  // namespace dg::test
