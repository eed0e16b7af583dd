// The two halves of the HTTP transport (http.h) and what they share: HttpServer::Impl, the network thread's state
// (acceptor, connections and their per-peer counts, handler pool; its members in http_server.cpp), and Connection,
// one client connection's read, dispatch and write cycle (http_connection.cpp). Included by those two files only.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "server/handler_pool.h"
#include "server/http.h"

namespace dg::server {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

// A connection is a member of HttpServer::Impl (external linkage), so its class has a name of its own rather
// than an anonymous namespace (GCC warns, -Wsubobject-linkage, once the file is compiled inside a unity batch).
namespace http_connection {
class Connection;

std::chrono::steady_clock::duration seconds(double s);
std::string status_line(int status);  // "HTTP/1.1 <status> <reason>\r\n"
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

  void close();
  // Stopping: a busy connection's socket is shut down (its writes fail) but stays open for its handler.
  void end();

 private:
  // The deadline of the phase in progress: reads are cancelled when it passes.
  void arm(double secs);
  void disarm();

  void read_head();
  void on_head(error_code ec);
  void read_body();
  void read_failed(error_code ec, const char* part);
  // A response the transport writes itself, then the connection closes.
  void refuse(int status, const std::string& message, const std::string& code);
  void dispatch();
  // On a handler thread.
  void handle(const HttpRequest& req);
  // A handler thread's write, carried out on the network thread; waits for it.
  bool write_from_handler(std::string bytes);
  // A whole response, on the network thread.
  void send(HttpResponse res);
  void after_response(bool keep);
  void drain();

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
}  // namespace dg::server
