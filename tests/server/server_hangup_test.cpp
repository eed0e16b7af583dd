// Client hang-ups on non-streaming requests, over raw sockets against the slow scripted model (20 ms per denoise
// step): a client that closes its socket while the worker runs its job cancels the job at its next step (499 in
// the HTTP metrics) and the next request is answered; so does a client that only half-closes (shutdown(SHUT_WR))
// after its request (it cannot be told from one that closed); a keep-alive connection's requests run to the end.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "server_test_util.h"

namespace dg::test {
namespace server_hangup_test {

constexpr const char* kChat = "/v1/chat/completions";

// Endless tokens at 20 ms per step, 8 steps per block of 32: 2000 tokens take 504 steps (~10 s), 256 take 64.
json slow_request(int max_tokens) { return chat_request("slow please", {{"max_tokens", max_tokens}, {"steps", 8}}); }

// Reads one Content-Length framed 200 response from a kept-alive connection.
std::string recv_response(int fd) {
  std::string got;
  char buf[4096];
  for (;;) {
    const size_t status = got.find("HTTP/1.1 200 OK\r\n");
    const size_t head = status == std::string::npos ? status : got.find("\r\n\r\n", status);
    const size_t len_at = got.find("Content-Length: ", status == std::string::npos ? 0 : status);
    if (head != std::string::npos && len_at < head && got.size() >= head + 4 + std::stoul(got.substr(len_at + 16)))
      return got;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return got;
    got.append(buf, static_cast<size_t>(n));
  }
}

TEST(ServerHangUp, ANonStreamingHangUpCancelsTheJob) {
  TestServer s({}, true);
  const int fd = connect_and_send(s.port, raw_post(kChat, slow_request(2000)));
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(eventually([&] { return s.metric("diffgemma_denoise_steps_total") >= 2; }));  // the worker runs it
  ::close(fd);
  ASSERT_TRUE(eventually([&] { return s.metric("diffgemma_jobs_total{outcome=\"cancelled\"}") == 1; }));
  EXPECT_TRUE(eventually([&] {
    return s.metric("diffgemma_http_requests_total{route=\"/v1/chat/completions\",status=\"499\"}") == 1;
  }));
  // The hung-up job ran far fewer than its 504 steps.
  EXPECT_LT(s.metric("diffgemma_denoise_steps_total"), 250);
  auto ok = s.post(kChat, chat_request("fast"));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(json::parse(ok->body)["choices"][0]["message"]["content"], "Hello from the script.");
  EXPECT_TRUE(eventually([&] { return s.metric("diffgemma_jobs_total{outcome=\"completed\"}") == 1; }));
}

// A client that ended its input looks exactly like one that closed (only a write could tell them apart), so the
// server cancels its job at once and writes nothing (docs/SERVER.md, "Hang-ups").
TEST(ServerHangUp, AHalfClosedClientCancelsTheJobToo) {
  TestServer s({}, true);
  const int fd = connect_and_send(s.port, raw_post(kChat, slow_request(2000)));
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::shutdown(fd, SHUT_WR), 0);
  const std::string got = recv_all(fd);
  ::close(fd);
  EXPECT_EQ(got, "");
  EXPECT_TRUE(eventually([&] { return s.metric("diffgemma_jobs_total{outcome=\"cancelled\"}") == 1; }));
  EXPECT_LT(s.metric("diffgemma_denoise_steps_total"), 250);
  EXPECT_EQ(s.metric("diffgemma_jobs_total{outcome=\"completed\"}"), 0);
}

TEST(ServerHangUp, AKeptAliveConnectionsRequestsRunToTheEnd) {
  TestServer s({}, true);
  const int fd = connect_and_send(s.port, raw_post(kChat, slow_request(256), false));
  ASSERT_GE(fd, 0);
  const std::string first = recv_response(fd);
  EXPECT_EQ(first.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << first.substr(0, 400);
  const std::string second_request = raw_post(kChat, slow_request(64), true);
  ASSERT_EQ(::send(fd, second_request.data(), second_request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(second_request.size()));
  const std::string second = recv_all(fd);
  ::close(fd);
  EXPECT_EQ(second.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << second.substr(0, 400);
  EXPECT_TRUE(eventually([&] { return s.metric("diffgemma_jobs_total{outcome=\"completed\"}") == 2; }));
  EXPECT_EQ(s.metric("diffgemma_jobs_total{outcome=\"cancelled\"}"), 0);
}

}  // namespace server_hangup_test
}  // namespace dg::test
