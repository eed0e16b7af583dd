// The HTTP transport against hostile and unusual clients, over raw loopback sockets: chunked bodies count against
// --max-body as they arrive, form-encoded bodies are read up to --max-body, pipelined requests are answered in
// order, clients that send their head a line at a time hold no thread (health and chat still answer) and are cut at
// the header deadline, a body that trickles is cut at the body deadline, connections are bounded per peer and in
// total (the longest-waiting one makes room), Expect: 100-continue is honoured and any other expectation is a 417, an
// HTTP/1.1 request without one Host field is a 400, and a body in a coding the server cannot read is refused (501,
// 415). Each attack is bounded: at most 100 connections, a few seconds.
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "server_test_util.h"

namespace dg::test {
namespace server_transport_test {

using Clock = std::chrono::steady_clock;
constexpr const char* kChat = "/v1/chat/completions";

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string chunked_head(const std::string& path) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
         "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
}
std::string chunk(const std::string& data) { return fmt::format("{:x}\r\n{}\r\n", data.size(), data); }

TEST(ServerTransport, ChunkedBodiesCountAgainstMaxBodyAsTheyArrive) {
  server::ServerOptions o;
  o.max_body_bytes = 64 << 10;
  TestServer s(o, true);
  const std::string body = chat_request("chunked").dump();

  // Within the limit, chunked is read like any body.
  int fd = connect_and_send(s.port, chunked_head(kChat) + chunk(body.substr(0, 10)) + chunk(body.substr(10)) +
                                        "0\r\n\r\n");
  ASSERT_GE(fd, 0);
  std::string got = recv_all(fd, 30);
  ::close(fd);
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;

  // 1 MiB of valid JSON (whitespace after the object) in 16 KiB chunks against a 64 KiB limit: 413 before the
  // client has sent it all, and the job never runs.
  fd = connect_and_send(s.port, chunked_head(kChat) + chunk(body));
  ASSERT_GE(fd, 0);
  const std::string pad = chunk(std::string(16 << 10, ' '));
  size_t sent = 0;
  for (int i = 0; i < 64 && send_all(fd, pad); ++i) sent += 16 << 10;
  send_all(fd, "0\r\n\r\n");
  got.clear();
  closed_by_server(fd, 10, &got);
  ::close(fd);
  EXPECT_EQ(got.rfind("HTTP/1.1 413", 0), 0u) << got;
  EXPECT_NE(got.find("--max-body"), std::string::npos) << got;
  EXPECT_EQ(s.metric("diffgemma_jobs_total{outcome=\"completed\"}"), 1);
}

// A body in a transfer coding other than chunked was read as no body, and the body as the next request (a request
// hidden in it was answered): 501, the connection closed. A compressed body (Content-Encoding) is a 415.
TEST(ServerTransport, BodiesInACodingTheServerCannotReadAreRefused) {
  TestServer s({}, true);
  const std::string hidden = "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  const auto send = [&](const std::string& headers, const std::string& body) {
    const int fd = connect_and_send(s.port, "POST " + std::string(kChat) + " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                    "Content-Type: application/json\r\n" + headers + "\r\n" + body);
    EXPECT_GE(fd, 0);
    std::string got = recv_all(fd, 10);
    ::close(fd);
    return got;
  };
  std::string got = send("Transfer-Encoding: gzip\r\n", hidden);
  EXPECT_EQ(got.rfind("HTTP/1.1 501", 0), 0u) << got;
  EXPECT_NE(got.find("Transfer-Encoding 'gzip' is not supported"), std::string::npos) << got;
  EXPECT_EQ(got.find("\"object\":\"list\""), std::string::npos) << "the body was read as a request: " << got;
  got = send("Transfer-Encoding: gzip, chunked\r\n", chunk("{}") + "0\r\n\r\n");
  EXPECT_EQ(got.rfind("HTTP/1.1 501", 0), 0u) << got;
  EXPECT_NE(got.find("'gzip, chunked'"), std::string::npos) << got;
  const std::string body = chat_request("coded").dump();
  got = send(fmt::format("Content-Encoding: gzip\r\nContent-Length: {}\r\n", body.size()), body);
  EXPECT_EQ(got.rfind("HTTP/1.1 415", 0), 0u) << got;
  EXPECT_NE(got.find("Content-Encoding 'gzip' is not supported"), std::string::npos) << got;
  // chunked in any case, and the identity coding, are read as before.
  got = send("Transfer-Encoding: Chunked\r\nConnection: close\r\n", chunk(body) + "0\r\n\r\n");
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  got = send(fmt::format("Content-Encoding: identity\r\nContent-Length: {}\r\nConnection: close\r\n", body.size()),
             body);
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
}

TEST(ServerTransport, FormEncodedBodiesAreReadUpToMaxBody) {
  server::ServerOptions o;
  o.api_keys = {"sk-form"};
  TestServer s(o, true);
  // curl -d sends application/x-www-form-urlencoded; 100 KB is far below --max-body (4 MiB).
  const std::string body = chat_request("form").dump() + std::string(100'000, ' ');
  httplib::Client c = s.client();
  auto r = c.Post(kChat, {{"Authorization", "Bearer sk-form"}}, body, "application/x-www-form-urlencoded");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST(ServerTransport, PipelinedRequestsAreAnsweredInOrder) {
  TestServer s({}, true);
  const std::string models = "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  const int fd = connect_and_send(s.port, raw_post(kChat, chat_request("first"), false) + models +
                                              raw_post("/v1/completions", {{"prompt", "third"}, {"max_tokens", 4}}));
  ASSERT_GE(fd, 0);
  const std::string got = recv_all(fd, 30);
  ::close(fd);
  const size_t first = got.find("\"chat.completion\""), second = got.find("\"object\":\"list\""),
               third = got.find("\"text_completion\"");
  ASSERT_NE(first, std::string::npos) << got;
  ASSERT_NE(second, std::string::npos) << got;
  ASSERT_NE(third, std::string::npos) << got;
  EXPECT_LT(first, second);
  EXPECT_LT(second, third);
  size_t answers = 0;
  for (size_t at = got.find("HTTP/1.1 200"); at != std::string::npos; at = got.find("HTTP/1.1 200", at + 1)) ++answers;
  EXPECT_EQ(answers, 3u) << got;
}

// 100 clients that each send a request head one line every 0.2 s: with the default limits they hold connections
// but no thread, so /health and a chat request are answered at once; at the header deadline each gets 408.
TEST(ServerTransport, SlowHeaderClientsLockNobodyOutAndAreCutAtTheDeadline) {
  server::ServerOptions o;
  o.header_timeout_s = 1.5;
  TestServer s(o, true);
  std::vector<int> slow;
  for (int i = 0; i < 100; ++i) {
    const int fd = connect_and_send(s.port, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    ASSERT_GE(fd, 0);
    slow.push_back(fd);
  }
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    for (int round = 0; !done && round < 25; ++round) {
      for (const int fd : slow) send_all(fd, fmt::format("X-Slow-{}: x\r\n", round));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double health = health_seconds(s.port);
  EXPECT_GE(health, 0) << "/health did not answer while 100 clients trickled their heads";
  EXPECT_LT(health, 1.0);
  auto r = s.post(kChat, chat_request("served anyway"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;

  int cut = 0;
  for (const int fd : slow) {
    std::string got;
    if (closed_by_server(fd, 4, &got) && got.rfind("HTTP/1.1 408", 0) == 0) ++cut;
  }
  done = true;
  trickle.join();
  for (const int fd : slow) ::close(fd);
  EXPECT_EQ(cut, 100) << "every slow client got 408 and was closed at the header deadline";
  EXPECT_GE(health_seconds(s.port), 0);
  EXPECT_EQ(s.metric("diffgemma_http_connections_closed_total{reason=\"timed_out\"}"), 100);
}

TEST(ServerTransport, ABodyThatTricklesIsCutAtTheBodyDeadline) {
  server::ServerOptions o;
  o.body_timeout_s = 1;
  TestServer s(o, true);
  const auto t0 = Clock::now();
  const int fd = connect_and_send(s.port, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                          "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{");
  ASSERT_GE(fd, 0);
  std::string got;
  for (int i = 0; i < 30 && !closed_by_server(fd, 0.1, &got); ++i) send_all(fd, " ");
  ::close(fd);
  EXPECT_EQ(got.rfind("HTTP/1.1 408", 0), 0u) << got;
  EXPECT_LT(seconds_since(t0), 2.5);
}

TEST(ServerTransport, ConnectionsAreBoundedPerPeerAndInTotal) {
  for (const bool per_peer : {true, false}) {
    server::ServerOptions o;
    if (per_peer) {
      o.max_connections_per_peer = 8;
    } else {
      o.max_connections = 8;
      o.max_connections_per_peer = 0;
    }
    TestServer s(o, true);
    std::vector<int> idle;
    for (int i = 0; i < 20; ++i) {
      idle.push_back(connect_and_send(s.port, "GET /health HTTP/1.1\r\n"));  // a head that never ends
      ASSERT_GE(idle.back(), 0);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the server sees them in this order
    }
    // The 12 that waited longest made room for the last 8, then one more for /health; those evictions happened
    // before /health was answered, so the survivors need no long look.
    EXPECT_GE(health_seconds(s.port), 0) << (per_peer ? "per peer" : "in total");
    int closed = 0;
    for (size_t i = 0; i < idle.size(); ++i) {
      const bool gone = closed_by_server(idle[i], i < 13 ? 2 : 0.02);
      closed += gone ? 1 : 0;
      EXPECT_EQ(gone, i < 13) << "connection " << i << (per_peer ? " (per peer)" : " (in total)");
      ::close(idle[i]);
    }
    EXPECT_EQ(closed, 13);
    EXPECT_EQ(s.metric("diffgemma_http_connections_closed_total{reason=\"evicted\"}"), 13);
  }
}

TEST(ServerTransport, ExpectContinueIsAnsweredAndAnOversizedBodyIsRefusedFirst) {
  server::ServerOptions o;
  o.max_body_bytes = 1024;
  TestServer s(o, true);
  const std::string body = chat_request("continue").dump();
  const std::string head = fmt::format("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                                       "application/json\r\nExpect: 100-continue\r\nConnection: close\r\n"
                                       "Content-Length: {}\r\n\r\n", body.size());
  int fd = connect_and_send(s.port, head);
  ASSERT_GE(fd, 0);
  char buf[64] = {};
  ASSERT_GT(::recv(fd, buf, sizeof(buf) - 1, 0), 0);
  EXPECT_EQ(std::string(buf).rfind("HTTP/1.1 100 Continue\r\n\r\n", 0), 0u) << buf;
  ASSERT_TRUE(send_all(fd, body));
  std::string got = recv_all(fd, 30);
  ::close(fd);
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;

  fd = connect_and_send(s.port, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\n"
                                "Content-Type: application/json\r\nContent-Length: 5000000\r\n\r\n");
  ASSERT_GE(fd, 0);
  got = recv_all(fd, 10);
  ::close(fd);
  EXPECT_EQ(got.rfind("HTTP/1.1 413", 0), 0u) << got;
}

// The status of one request sent as `bytes` on a fresh connection, and the error object of its JSON body (a
// 100 Continue before the answer skipped).
std::pair<int, json> answer(int port, const std::string& bytes) {
  const int fd = connect_and_send(port, bytes);
  if (fd < 0) return {0, json()};
  std::string got = recv_all(fd, 10);
  ::close(fd);
  const std::string interim = "HTTP/1.1 100 Continue\r\n\r\n";
  if (got.rfind(interim, 0) == 0) got.erase(0, interim.size());
  const int status = got.rfind("HTTP/1.1 ", 0) == 0 ? std::atoi(got.c_str() + 9) : 0;
  const size_t at = got.find("\r\n\r\n");
  const json j = at == std::string::npos ? json() : json::parse(got.substr(at + 4), nullptr, false);
  return {status, j.is_object() && j.contains("error") ? j["error"] : json()};
}

// RFC 9112 3.2: an HTTP/1.1 request must carry exactly one Host field (400 otherwise); HTTP/1.0 needs none.
TEST(ServerTransport, AnHttp11RequestWithoutOneHostIsA400) {
  TestServer s({}, true);
  auto [status, error] = answer(s.port, "GET /v1/models HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(status, 400);
  EXPECT_EQ(error["code"], "missing_host") << error;
  EXPECT_NE(error.value("message", "").find("no Host header"), std::string::npos) << error;
  const std::string body = chat_request("no host").dump();
  std::tie(status, error) = answer(s.port, fmt::format("POST {} HTTP/1.1\r\nContent-Type: application/json\r\n"
                                                       "Content-Length: {}\r\n\r\n{}", kChat, body.size(), body));
  EXPECT_EQ(status, 400);
  EXPECT_EQ(error["code"], "missing_host") << error;
  std::tie(status, error) = answer(s.port, "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n"
                                           "Connection: close\r\n\r\n");
  EXPECT_EQ(status, 400);
  EXPECT_EQ(error["code"], "repeated_host") << error;
  EXPECT_EQ(answer(s.port, "GET /v1/models HTTP/1.0\r\n\r\n").first, 200) << "HTTP/1.0 has no Host";
  EXPECT_EQ(answer(s.port, "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").first, 200);
}

// An expectation other than 100-continue (in any case) cannot be met: 417 naming it, before the body is read.
TEST(ServerTransport, AnExpectationOtherThanContinueIsA417) {
  TestServer s({}, true);
  const std::string body = chat_request("expect").dump();
  const auto post = [&](const std::string& expect) {
    return answer(s.port, fmt::format("POST {} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                      "Expect: {}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{}",
                                      kChat, expect, body.size(), body));
  };
  auto [status, error] = post("200-ok");
  EXPECT_EQ(status, 417);
  EXPECT_EQ(error["code"], "expectation_failed") << error;
  EXPECT_NE(error.value("message", "").find("Expect '200-ok'"), std::string::npos) << error;
  EXPECT_EQ(post("100-continue, 200-ok").first, 417);
  // 100-continue in another case is honoured (the body is already sent, so no 100 is needed before it).
  std::tie(status, error) = post("100-Continue");
  EXPECT_EQ(status, 200) << error;
}

}  // namespace server_transport_test
}  // namespace dg::test
