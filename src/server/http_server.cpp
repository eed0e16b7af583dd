// The network thread: accepts connections (bounded in total and per peer, the longest-waiting idle one evicted to
// make room), binds, runs and stops the server. Each connection's reading and writing: http_connection.cpp.
// Handlers that wait run on a fixed pool; a streaming one writes through posts to the network thread.
#include "server/http.h"

#include <strings.h>

#include <chrono>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "server/http_connection.h"

namespace dg::server {

namespace {

// Writes a short refusal to a socket the server does not keep, without waiting.
void refuse_now(tcp::socket& sock, const HttpResponse& res) {
  std::string out = http_connection::status_line(res.status) + "Content-Type: " + res.content_type + "\r\n";
  for (const auto& [k, v] : res.headers) out += k + ": " + v + "\r\n";
  out += fmt::format("Content-Length: {}\r\nConnection: close\r\n\r\n", res.body.size()) + res.body;
  error_code ec;
  sock.non_blocking(true, ec);
  sock.write_some(net::buffer(out), ec);
  sock.shutdown(tcp::socket::shutdown_both, ec);
  sock.close(ec);
}

}  // namespace

void HttpServer::Impl::accept() {
  acceptor.async_accept([this](error_code ec, tcp::socket sock) {
    if (stopping) return;
    if (ec) {  // out of descriptors, say: try again shortly rather than spin
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](error_code) {
        if (!stopping) accept();
      });
      return;
    }
    admit(std::move(sock));
    accept();
  });
}

void HttpServer::Impl::admit(tcp::socket sock) {
  error_code ec;
  const tcp::endpoint remote = sock.remote_endpoint(ec);
  if (ec) return;
  const std::string peer = remote.address().to_string();
  ++counters.accepted;
  const int per_peer_max = limits.max_connections_per_peer;
  const auto held = per_peer.find(peer);
  const int from_peer = held == per_peer.end() ? 0 : held->second;
  if ((per_peer_max > 0 && from_peer >= per_peer_max && !evict_oldest(peer)) ||
      (static_cast<int>(conns.size()) >= limits.max_connections && !evict_oldest(""))) {
    ++counters.refused;
    return refuse_now(sock, handlers.refusal(503, "the server has too many open connections; retry later",
                                                      "too_many_connections"));
  }
  sock.set_option(tcp::no_delay(true), ec);
  auto c = std::make_shared<Connection>(*this, std::move(sock), peer, remote.port());
  conns.push_back(c);
  ++per_peer[peer];
  ++counters.open;
  c->start();
}

bool HttpServer::Impl::evict_oldest(const std::string& peer) {
  Connection* oldest = nullptr;
  for (const auto& c : conns)
    if (!c->busy() && !c->closed() && (peer.empty() || c->peer() == peer) &&
        (oldest == nullptr || c->waiting_since() < oldest->waiting_since()))
      oldest = c.get();
  if (oldest == nullptr) return false;
  ++counters.evicted;
  oldest->close();
  return true;
}

void HttpServer::Impl::forget(Connection* c) {
  for (auto it = conns.begin(); it != conns.end(); ++it) {
    if (it->get() != c) continue;
    if (--per_peer[c->peer()] == 0) per_peer.erase(c->peer());
    --counters.open;
    conns.erase(it);  // the last owner may be a pending handler: the object lives until it has run
    return;
  }
}

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k.size() == name.size() && strncasecmp(k.data(), name.data(), k.size()) == 0) return v;
  return {};
}

HttpServer::HttpServer(HttpLimits limits, HttpHandlers handlers)
    : impl_(std::make_unique<Impl>(limits, std::move(handlers))) {
  DG_CHECK(limits.handler_threads >= 1, "the HTTP server needs at least one handler thread");
  DG_CHECK(limits.max_connections >= 1, "--max-connections must be at least 1");
  DG_CHECK(limits.header_timeout_s > 0 && limits.body_timeout_s > 0, "the request timeouts must be positive");
}

HttpServer::~HttpServer() { stop(0); }

const HttpCounters& HttpServer::counters() const { return impl_->counters; }

int HttpServer::bind(const std::string& host, int port) {
  DG_CHECK(port >= 0 && port <= 65535, "port {} is not a TCP port (0 to 65535; 0: any free port)", port);
  Impl& s = *impl_;
  error_code ec;
  const net::ip::address addr = net::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  DG_CHECK(!ec, "cannot listen on {}: not an IP address of this machine ({})", host, ec.message());
  const tcp::endpoint ep(addr, static_cast<uint16_t>(port));
  s.acceptor.open(ep.protocol(), ec);
  if (!ec) s.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(ep, ec);
  if (!ec) s.acceptor.listen(1024, ec);
  DG_CHECK(!ec, "cannot listen on {}:{}: {} (the port is in use, or the host is not an address of this machine)",
           host, port, ec.message());
  return s.acceptor.local_endpoint().port();
}

void HttpServer::run() {
  Impl& s = *impl_;
  {
    std::lock_guard<std::mutex> lock(s.stop_mu);
    if (s.stopped) return;
    s.running = true;
  }
  net::post(s.io, [&s] { s.accept(); });
  s.io.run();
}

void HttpServer::stop(double grace_s) {
  Impl& s = *impl_;
  {
    std::lock_guard<std::mutex> lock(s.stop_mu);
    if (s.stopped) return;
    s.stopped = true;
    s.stopping = true;
    if (!s.running) return;
  }
  const auto all = [&s] { return std::list<std::shared_ptr<Connection>>(s.conns); };
  // Stop accepting and close the idle connections; answers in progress go on (their connections close after).
  // By value: an ask that times out leaves its function queued to run after this frame is gone.
  s.ask([&s, all] {
    error_code ec;
    s.acceptor.close(ec);
    s.accept_retry.cancel();
    for (const auto& c : all())
      if (!c->busy()) c->close();
    return true;
  });
  const auto until = Clock::now() + http_connection::seconds(grace_s);
  while (Clock::now() < until) {
    if (s.pool.wait_idle(Clock::now()) && s.ask([&s] { return s.conns.empty(); })) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // What is left is shut down: its writes fail, its handlers return.
  s.ask([all] {
    for (const auto& c : all()) c->end();
    return true;
  });
  s.pool.wait_idle(Clock::time_point::max());
  s.ask([all] {
    for (const auto& c : all()) c->end();
    return true;
  });
  s.work.reset();
  s.io.stop();
}

}  // namespace dg::server
