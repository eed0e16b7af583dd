// The network thread: accepts connections (bounded in total and per peer), reads each request with deadlines and
// a body limit (Beast's parser counts every transfer encoding as bytes arrive), and writes the answers in request
// order. Handlers that wait run on a fixed pool; a streaming one writes through posts to the network thread.
#include "server/http.h"

#include <strings.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include "core/error.h"
#include "server/handler_pool.h"

namespace dg::server {
namespace {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

constexpr double kLingerSeconds = 1;  // how long a closing connection's input is drained

std::string status_line(int status) {
  const auto reason = http::obsolete_reason(static_cast<http::status>(status));
  return fmt::format("HTTP/1.1 {} {}\r\n", status, reason.empty() ? std::string("Unknown") : std::string(reason));
}

}  // namespace

// A connection is a member of HttpServer::Impl (external linkage), so its class has a name of its own rather
// than an anonymous namespace (GCC warns, -Wsubobject-linkage, once the file is compiled inside a unity batch).
namespace http_connection {
class Connection;
}  // namespace http_connection
using http_connection::Connection;

class HttpServer::Impl {
 public:
  Impl(HttpLimits l, HttpHandlers h) : limits(l), handlers(std::move(h)), pool(l.handler_threads) {}

  void accept();
  void admit(tcp::socket sock);
  void forget(Connection* c);
  // Closes the connection of `peer` ("" any) that has waited longest for a request; false when all are busy.
  bool evict_oldest(const std::string& peer);

  HttpLimits limits;
  HttpHandlers handlers;
  HttpCounters counters;
  net::io_context io{1};
  net::executor_work_guard<net::io_context::executor_type> work{io.get_executor()};
  tcp::acceptor acceptor{io};
  net::steady_timer accept_retry{io};
  HandlerPool pool;
  std::list<std::shared_ptr<Connection>> conns;  // network thread only
  std::map<std::string, int> per_peer;           // network thread only
  std::atomic<bool> stopping{false};
  std::mutex stop_mu;
  bool stopped = false, running = false;

  // Runs `f` on the network thread and returns its answer (false when it did not run within 5 s).
  bool ask(std::function<bool()> f) {
    auto answer = std::make_shared<std::promise<bool>>();
    std::future<bool> result = answer->get_future();
    net::post(io, [answer, f = std::move(f)] { answer->set_value(f()); });
    return result.wait_for(std::chrono::seconds(5)) == std::future_status::ready && result.get();
  }
};

namespace http_connection {

// One client connection. Every member runs on the network thread, except the streaming writes a handler makes
// through write_from_handler (posted there). While a handler holds the request (busy) the socket is never closed
// (it may be polled for a hang-up), only shut down.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  enum class Phase : uint8_t { kWait, kBody, kBusy, kWrite, kClosed };

  Connection(HttpServer::Impl& s, tcp::socket sock, std::string peer, int peer_port)
      : s_(s), sock_(std::move(sock)), timer_(s.io), buf_(s.limits.max_head + (64u << 10)), peer_(std::move(peer)),
        peer_port_(peer_port) {}

  const std::string& peer() const { return peer_; }
  bool busy() const { return phase_ == Phase::kBusy || phase_ == Phase::kWrite; }
  bool closed() const { return phase_ == Phase::kClosed; }
  Clock::time_point waiting_since() const { return waiting_since_; }

  void start() { read_head(); }

  void close() {
    if (phase_ == Phase::kClosed) return;
    phase_ = Phase::kClosed;
    disarm();
    error_code ec;
    sock_.shutdown(tcp::socket::shutdown_both, ec);
    sock_.close(ec);
    s_.forget(this);
  }
  // Stopping: a busy connection's socket is shut down (its writes fail) but stays open for its handler.
  void end() {
    if (busy()) {
      error_code ec;
      sock_.shutdown(tcp::socket::shutdown_both, ec);
    } else {
      close();
    }
  }

 private:
  // The deadline of the phase in progress: reads are cancelled when it passes.
  void arm(double secs) {
    const uint64_t gen = ++timer_gen_;
    timer_.expires_after(seconds(secs));
    timer_.async_wait([self = shared_from_this(), gen](error_code ec) {
      if (ec || gen != self->timer_gen_ || self->closed()) return;
      self->timed_out_ = true;
      error_code ignored;
      self->sock_.cancel(ignored);
    });
  }
  void disarm() {
    ++timer_gen_;
    timer_.cancel();
  }

  void read_head() {
    if (s_.stopping) return close();
    phase_ = Phase::kWait;
    waiting_since_ = Clock::now();
    timed_out_ = false;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(s_.limits.max_head));
    parser_->body_limit(static_cast<uint64_t>(s_.limits.max_body));
    arm(s_.limits.header_timeout_s);
    http::async_read_header(sock_, buf_, *parser_,
                            [self = shared_from_this()](error_code ec, size_t) { self->on_head(ec); });
  }

  void on_head(error_code ec) {
    if (closed()) return;
    if (ec) return read_failed(ec, "head");
    const auto& head = parser_->get();
    if (!parser_->is_done() && strcasecmp(std::string(head[http::field::expect]).c_str(), "100-continue") == 0) {
      auto msg = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      net::async_write(sock_, net::buffer(*msg), [self = shared_from_this(), msg](error_code wec, size_t) {
        if (self->closed()) return;
        if (wec) return self->close();
        self->read_body();
      });
      return;
    }
    if (parser_->is_done()) return dispatch();
    read_body();
  }

  void read_body() {
    phase_ = Phase::kBody;
    arm(s_.limits.body_timeout_s);
    http::async_read(sock_, buf_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
      if (self->closed()) return;
      if (ec) return self->read_failed(ec, "body");
      self->dispatch();
    });
  }

  void read_failed(error_code ec, const char* part) {
    if (timed_out_) {
      ++s_.counters.timed_out;
      if (!parser_->got_some() && buf_.size() == 0) return close();  // an idle keep-alive connection
      return refuse(408,
                    fmt::format("the request {} did not arrive within {} s", part,
                                part == std::string("head") ? s_.limits.header_timeout_s : s_.limits.body_timeout_s),
                    "request_timeout");
    }
    if (ec == http::error::body_limit)
      return refuse(413,
                    fmt::format("the request body is larger than this server accepts ({} bytes, --max-body)",
                                s_.limits.max_body),
                    "body_too_large");
    if (ec == http::error::header_limit)
      return refuse(431, fmt::format("the request head is larger than this server accepts ({} bytes)",
                                     s_.limits.max_head),
                    "head_too_large");
    if (ec == http::error::end_of_stream || ec == http::error::partial_message || ec == net::error::eof ||
        ec == net::error::connection_reset || ec == net::error::operation_aborted)
      return close();  // the client went away
    refuse(400, fmt::format("the request could not be read: {}", ec.message()), "bad_request");
  }

  // A response the transport writes itself, then the connection closes.
  void refuse(int status, const std::string& message, const std::string& code) {
    HttpResponse res = s_.handlers.refusal(status, message, code);
    res.close = true;
    request_ = std::make_shared<HttpRequest>();
    if (parser_ && parser_->is_header_done()) {
      request_->method = std::string(parser_->get().method_string());
      request_->target = request_->path = std::string(parser_->get().target());
    }
    send(std::move(res));
  }

  void dispatch() {
    disarm();
    phase_ = Phase::kBusy;
    http::request<http::string_body> msg = parser_->release();
    auto req = std::make_shared<HttpRequest>();
    req->method = std::string(msg.method_string());
    req->target = std::string(msg.target());
    req->path = req->target.substr(0, req->target.find('?'));
    for (const auto& f : msg) req->headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    req->body = std::move(msg.body());
    req->remote_addr = peer_;
    req->remote_port = peer_port_;
    req->version = static_cast<int>(msg.version());
    req->fd = sock_.native_handle();
    keep_alive_ = msg.keep_alive();
    request_ = req;

    HttpResponse res;
    bool answered = false;
    try {
      answered = s_.handlers.quick(*req, res);
    } catch (const std::exception& e) {
      res = s_.handlers.refusal(500, fmt::format("internal error: {}", e.what()), "internal_error");
      answered = true;
    }
    if (answered) return send(std::move(res));
    const bool taken = s_.pool.try_submit([self = shared_from_this(), req] { self->handle(*req); });
    if (!taken)
      send(s_.handlers.refusal(429, "every request thread of the server is busy; retry later", "server_busy"));
  }

  // On a handler thread.
  void handle(const HttpRequest& req) {
    HttpResponse res;
    try {
      s_.handlers.slow(req, res);
    } catch (const std::exception& e) {
      res = s_.handlers.refusal(500, fmt::format("internal error: {}", e.what()), "internal_error");
    }
    if (!res.stream) {
      net::post(s_.io, [self = shared_from_this(), res = std::move(res)]() mutable { self->send(std::move(res)); });
      return;
    }
    const bool chunked = req.version >= 11;
    std::string head = status_line(res.status) + "Content-Type: " + res.content_type + "\r\n";
    for (const auto& [k, v] : res.headers) head += k + ": " + v + "\r\n";
    head += chunked ? "Transfer-Encoding: chunked\r\n" : "";
    head += chunked && keep_alive_ && !s_.stopping ? "\r\n" : "Connection: close\r\n\r\n";
    bool ok = write_from_handler(std::move(head));
    if (ok)
      res.stream([&](std::string_view piece) {
        if (piece.empty()) return ok;
        const std::string framed = chunked ? fmt::format("{:x}\r\n{}\r\n", piece.size(), piece) : std::string(piece);
        ok = ok && write_from_handler(framed);
        return ok;
      });
    if (ok && chunked) ok = write_from_handler("0\r\n\r\n");
    const int status = res.status;
    net::post(s_.io, [self = shared_from_this(), ok, chunked, status] {
      self->s_.handlers.done(*self->request_, status);
      self->after_response(ok && chunked && self->keep_alive_);
    });
  }

  // A handler thread's write, carried out on the network thread; waits for it.
  bool write_from_handler(std::string bytes) {
    auto done = std::make_shared<std::promise<bool>>();
    std::future<bool> result = done->get_future();
    auto data = std::make_shared<std::string>(std::move(bytes));
    net::post(s_.io, [self = shared_from_this(), done, data] {
      if (self->closed()) return done->set_value(false);
      self->phase_ = Phase::kWrite;
      self->timed_out_ = false;
      self->arm(self->s_.limits.write_timeout_s);
      net::async_write(self->sock_, net::buffer(*data), [self, done, data](error_code ec, size_t) {
        self->disarm();
        self->phase_ = Phase::kBusy;
        if (ec && self->timed_out_) ++self->s_.counters.timed_out;
        done->set_value(!ec);
      });
    });
    try {
      return result.get();
    } catch (const std::future_error&) {  // the network thread ended without running the write
      return false;
    }
  }

  // A whole response, on the network thread.
  void send(HttpResponse res) {
    if (closed()) return;
    if (res.hang_up) {
      s_.handlers.done(*request_, res.status);
      return close();
    }
    const bool keep = keep_alive_ && !res.close && !s_.stopping && request_->version >= 11;
    auto msg = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(res.status), 11);
    msg->set(http::field::content_type, res.content_type);
    for (const auto& [k, v] : res.headers) msg->set(k, v);
    msg->body() = std::move(res.body);
    msg->keep_alive(keep);
    msg->prepare_payload();
    if (request_->method == "HEAD") msg->body().clear();  // the head only (Content-Length stays the body's)
    phase_ = Phase::kWrite;
    timed_out_ = false;
    arm(s_.limits.write_timeout_s);
    const int status = res.status;
    http::async_write(sock_, *msg, [self = shared_from_this(), msg, keep, status](error_code ec, size_t) {
      if (self->closed()) return;
      self->disarm();
      if (ec && self->timed_out_) ++self->s_.counters.timed_out;
      self->s_.handlers.done(*self->request_, status);
      self->after_response(!ec && keep);
    });
  }

  void after_response(bool keep) {
    request_.reset();
    if (closed()) return;
    if (keep) return read_head();
    // A lingering close: what the client still sends (the rest of a refused body) is read and dropped for a
    // moment, so that closing does not reset the connection before the client has read the answer.
    phase_ = Phase::kWait;  // not busy any more: close() may release the socket, eviction may pick it
    if (s_.stopping) return close();
    error_code ec;
    sock_.shutdown(tcp::socket::shutdown_send, ec);
    arm(kLingerSeconds);
    drain();
  }
  void drain() {
    auto scratch = std::make_shared<std::array<char, 16384>>();
    sock_.async_read_some(net::buffer(*scratch), [self = shared_from_this(), scratch](error_code ec, size_t) {
      if (self->closed()) return;
      if (ec) return self->close();
      self->drain();
    });
  }

  HttpServer::Impl& s_;
  tcp::socket sock_;
  net::steady_timer timer_;
  uint64_t timer_gen_ = 0;
  bool timed_out_ = false;
  boost::beast::flat_buffer buf_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<HttpRequest> request_;  // the request being answered
  bool keep_alive_ = true;
  Phase phase_ = Phase::kWait;
  Clock::time_point waiting_since_ = Clock::now();
  std::string peer_;
  int peer_port_ = 0;
};

}  // namespace http_connection

namespace {

// Writes a short refusal to a socket the server does not keep, without waiting.
void refuse_now(tcp::socket& sock, const HttpResponse& res) {
  std::string out = status_line(res.status) + "Content-Type: " + res.content_type + "\r\n";
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
  const auto until = Clock::now() + seconds(grace_s);
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
