#include "server_test_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "support/paths.h"
#include "support/process.h"
#include "support/scripted_denoiser.h"

namespace dg::test {

const EngineCore& tiny_server_engine() {
  static const std::unique_ptr<EngineCore> e = [] {
    EngineOptions o;
    o.model_dir = source_path("models/dg-tiny");
    o.context = 8192 + 64;
    return EngineCore::open(o);
  }();
  return *e;
}

TestServer::TestServer(server::ServerOptions opt, bool scripted, bool warm_up) {
  opt.host = "127.0.0.1";
  opt.port = 0;
  const EngineCore& e = tiny_server_engine();
  srv = std::make_unique<server::Server>(e, opt, nullptr, scripted ? scripted_denoisers(e.tokenizer()) : nullptr);
  port = srv->bind();
  if (warm_up) srv->warm_up();
  thread = std::thread([this] { srv->run(); });
}

TestServer::~TestServer() {
  srv->stop();
  thread.join();
}

httplib::Client TestServer::client() const {
  httplib::Client c("127.0.0.1", port);
  // A whole non-streamed answer: under ASan on a loaded 2-core machine a batched one took over 60 s.
  c.set_read_timeout(180, 0);
  return c;
}

httplib::Result TestServer::post(const std::string& path, const json& body, const httplib::Headers& headers) const {
  return client().Post(path, headers, body.dump(), "application/json");
}

std::string TestServer::stream(const std::string& path, const json& body,
                               const std::function<bool(const std::string&)>& on_data) const {
  return stream_post(port, path, body, on_data);
}

std::string raw_post(const std::string& path, const json& body, bool close) {
  const std::string b = body.dump();
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(b.size()) + "\r\n" + (close ? "Connection: close\r\n" : "") + "\r\n" + b;
}

int connect_and_send(int port, const std::string& bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size())) {
    ::close(fd);
    return -1;
  }
  return fd;
}

namespace {

// Reads until the peer closes, an error or timeout, or `on_data` (given everything so far) returns false.
std::string recv_while(int fd, const std::function<bool(const std::string&)>& on_data) {
  std::string got;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
    if (!on_data(got)) break;
  }
  return got;
}

}  // namespace

std::string recv_all(int fd, double seconds) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(seconds);
  tv.tv_usec = static_cast<suseconds_t>((seconds - static_cast<double>(tv.tv_sec)) * 1e6);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return recv_while(fd, [](const std::string&) { return true; });
}

bool send_all(int fd, const std::string& bytes) {
  return ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

bool closed_by_server(int fd, double seconds, std::string* got) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  char buf[4096];
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n <= 0) return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
    if (got != nullptr) got->append(buf, static_cast<size_t>(n));
  }
  return false;
}

double health_seconds(int port) {
  const auto t0 = std::chrono::steady_clock::now();
  const int fd = connect_and_send(port, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  if (fd < 0) return -1;
  const std::string got = recv_all(fd, 3);
  ::close(fd);
  return got.rfind("HTTP/1.1 200", 0) == 0
             ? std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
             : -1;
}

std::string stream_post(int port, const std::string& path, const json& body,
                        const std::function<bool(const std::string&)>& on_data) {
  const int fd = connect_and_send(port, raw_post(path, body));
  if (fd < 0) return {};
  std::string got = recv_while(fd, on_data);
  ::close(fd);
  return got;
}

ServerProcess::ServerProcess(const std::string& args) {
  log_path = scratch_dir("serve") + "/stderr.log";
  const std::string cmd = cli_path() + " serve --port 0 " + args;
  pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 2);
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  eventually([&] {
    std::ifstream in(log_path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = text.find("listening on http://127.0.0.1:");
    if (at == std::string::npos) return false;
    port = std::atoi(text.c_str() + at + std::string("listening on http://127.0.0.1:").size());
    return port > 0;
  }, 60);
}

ServerProcess::~ServerProcess() {
  if (pid > 0) stop();
}

int ServerProcess::stop() {
  if (pid <= 0) return -1;
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  pid = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

double ServerProcess::rss_mb() const {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      double kb = 0;
      in >> kb;
      return kb / 1024.0;
    }
    std::getline(in, key);
  }
  return -1;
}

httplib::Client ServerProcess::client() const {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120, 0);
  return c;
}

std::string TestServer::metrics() const {
  auto r = client().Get("/metrics");
  return r ? r->body : std::string();
}

double TestServer::metric(const std::string& prefix) const { return metric_value(metrics(), prefix); }

double metric_value(const std::string& m, const std::string& prefix) {
  size_t at = 0;
  while (at < m.size()) {
    const size_t nl = m.find('\n', at);
    const std::string line = m.substr(at, nl - at);
    at = nl == std::string::npos ? m.size() : nl + 1;
    if (line.rfind(prefix, 0) == 0 && line.size() > prefix.size() && line[prefix.size()] == ' ')
      return std::stod(line.substr(prefix.size() + 1));
  }
  return -1;
}

std::string only_log_in(const std::string& dir) {
  std::string path;
  for (const auto& f : std::filesystem::directory_iterator(dir)) path = f.path().string();
  return path;
}

json open_record_of(const std::string& log) {
  std::ifstream in(log);
  std::string first;
  std::getline(in, first);
  return json::parse(first, nullptr, false);
}

void expect_replay(const std::string& log, const std::string& args, bool identical) {
  const ProcessResult r = run_command(cli_path() + " replay " + args + " " + log);
  EXPECT_EQ(r.code, identical ? 0 : 1) << r.out;
  EXPECT_NE(r.out.find(identical ? "identical" : "diverged"), std::string::npos) << r.out;
}

json chat_request(const std::string& user, const json& extra) {
  json j = {{"model", "dg-tiny"},
            {"messages", json::array({{{"role", "user"}, {"content", user}}})},
            {"max_tokens", 8},
            {"steps", 2},
            {"seed", 7}};
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  return j;
}

json weather_tools() {
  return json::array({{{"type", "function"},
                       {"function", {{"name", "get_weather"},
                                     {"description", "Current weather"},
                                     {"parameters", {{"type", "object"},
                                                     {"properties", {{"city", {{"type", "string"}}}}},
                                                     {"required", {"city"}}}}}}}});
}

bool eventually(const std::function<bool()>& pred, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

SseStream parse_sse(const std::string& body) {
  SseStream s;
  s.raw = body;
  size_t at = 0;
  while (at < body.size()) {
    size_t end = body.find("\n\n", at);
    if (end == std::string::npos) end = body.size();
    const std::string ev = body.substr(at, end - at);
    at = end + 2;
    if (ev.empty() || ev[0] == ':') continue;  // a comment (heartbeat)
    if (ev.rfind("data: ", 0) != 0) {
      s.error = "not a data line: " + ev;
      continue;
    }
    const std::string payload = ev.substr(6);
    if (s.done) s.error = "data after [DONE]";
    if (payload == "[DONE]") {
      s.done = true;
      continue;
    }
    json j = json::parse(payload, nullptr, false);
    if (j.is_discarded()) s.error = "not JSON: " + payload;
    s.chunks.push_back(j);
  }
  return s;
}

}  // namespace dg::test
