// One client connection of the HTTP transport (http_connection.h): reads each request with deadlines and a body
// limit (Beast's parser counts every transfer encoding as bytes arrive), hands it to the quick route or the handler
// pool, and writes the answers in request order, streaming ones through posts to the network thread.
#include "server/http_connection.h"

#include <array>
#include <chrono>
#include <exception>
#include <future>
#include <memory>
#include <string>

#include <fmt/format.h>

namespace dg::server {
namespace {

constexpr double kLingerSeconds = 1;  // how long a closing connection's input is drained

// Every value of a header field, joined as one list (a field may be repeated).
std::string field_list(const http::request_parser<http::string_body>::value_type& head, http::field f) {
  std::string out;
  for (auto [it, end] = head.equal_range(f); it != end; ++it)
    out += (out.empty() ? "" : ", ") + std::string(it->value());
  return out;
}

// The list with its items trimmed and lower-cased, empty items dropped ("gzip , Chunked" -> "gzip, chunked").
std::string coding_list(const std::string& list) {
  std::string out, item;
  const auto flush = [&] {
    const size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b != std::string::npos) out += (out.empty() ? "" : ", ") + item.substr(b, e - b + 1);
    item.clear();
  };
  for (const char c : list) {
    if (c == ',')
      flush();
    else
      item += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  flush();
  return out;
}

}  // namespace

namespace http_connection {

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

std::string status_line(int status) {
  const auto reason = http::obsolete_reason(static_cast<http::status>(status));
  return fmt::format("HTTP/1.1 {} {}\r\n", status, reason.empty() ? std::string("Unknown") : std::string(reason));
}

void Connection::close() {
  if (phase_ == Phase::kClosed) return;
  phase_ = Phase::kClosed;
  disarm();
  error_code ec;
  sock_.shutdown(tcp::socket::shutdown_both, ec);
  sock_.close(ec);
  s_.forget(this);
}

void Connection::end() {
  if (busy()) {
    error_code ec;
    sock_.shutdown(tcp::socket::shutdown_both, ec);
  } else {
    close();
  }
}

void Connection::arm(double secs) {
  const uint64_t gen = ++timer_gen_;
  timer_.expires_after(seconds(secs));
  timer_.async_wait([self = shared_from_this(), gen](error_code ec) {
    if (ec || gen != self->timer_gen_ || self->closed()) return;
    self->timed_out_ = true;
    error_code ignored;
    self->sock_.cancel(ignored);
  });
}

void Connection::disarm() {
  ++timer_gen_;
  timer_.cancel();
}

void Connection::read_head() {
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

void Connection::on_head(error_code ec) {
  if (closed()) return;
  if (ec) return read_failed(ec, "head");
  const auto& head = parser_->get();
  // RFC 9112 3.2: an HTTP/1.1 request without a Host field, or with more than one, is a 400 (HTTP/1.0 has none).
  const size_t hosts = head.count(http::field::host);
  if (hosts > 1)
    return refuse(400, fmt::format("the request has {} Host header fields; HTTP/1.1 requires exactly one", hosts),
                  "repeated_host");
  if (hosts == 0 && head.version() >= 11)
    return refuse(400, "the request has no Host header field, which HTTP/1.1 requires (RFC 9112 3.2)",
                  "missing_host");
  // A body is framed by Content-Length or chunked alone: the parser takes a body under any other coding as no body
  // and would read it as the next request (RFC 9112 6.1: 501), and a body it cannot decode is refused (RFC 7694).
  const std::string te = coding_list(field_list(head, http::field::transfer_encoding));
  if (!te.empty() && te != "chunked")
    return refuse(501, fmt::format("Transfer-Encoding '{}' is not supported: send the body with Content-Length or "
                                   "'Transfer-Encoding: chunked'", te),
                  "unsupported_transfer_encoding");
  const std::string ce = coding_list(field_list(head, http::field::content_encoding));
  if (!ce.empty() && ce != "identity")
    return refuse(415, fmt::format("Content-Encoding '{}' is not supported: send the body uncompressed", ce),
                  "unsupported_content_encoding");
  // The one expectation defined is 100-continue; any other cannot be met (RFC 9110 10.1.1: 417).
  const std::string expect = field_list(head, http::field::expect);
  if (!expect.empty() && coding_list(expect) != "100-continue")
    return refuse(417, fmt::format("Expect '{}' is not supported: the only expectation this server meets is "
                                   "'100-continue'", expect),
                  "expectation_failed");
  if (!parser_->is_done() && !expect.empty()) {
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

void Connection::read_body() {
  phase_ = Phase::kBody;
  arm(s_.limits.body_timeout_s);
  http::async_read(sock_, buf_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
    if (self->closed()) return;
    if (ec) return self->read_failed(ec, "body");
    self->dispatch();
  });
}

void Connection::read_failed(error_code ec, const char* part) {
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

void Connection::refuse(int status, const std::string& message, const std::string& code) {
  HttpResponse res = s_.handlers.refusal(status, message, code);
  res.close = true;
  request_ = std::make_shared<HttpRequest>();
  if (parser_ && parser_->is_header_done()) {
    request_->method = std::string(parser_->get().method_string());
    request_->target = request_->path = std::string(parser_->get().target());
  }
  send(std::move(res));
}

void Connection::dispatch() {
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

void Connection::handle(const HttpRequest& req) {
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

bool Connection::write_from_handler(std::string bytes) {
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

void Connection::send(HttpResponse res) {
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

void Connection::after_response(bool keep) {
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

void Connection::drain() {
  auto scratch = std::make_shared<std::array<char, 16384>>();
  sock_.async_read_some(net::buffer(*scratch), [self = shared_from_this(), scratch](error_code ec, size_t) {
    if (self->closed()) return;
    if (ec) return self->close();
    self->drain();
  });
}

}  // namespace http_connection
}  // namespace dg::server
