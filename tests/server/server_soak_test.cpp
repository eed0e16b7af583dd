// Soak: `diffgemma serve` on the embedded model as a child process; 32 concurrent clients x 5 requests mixing
// plain and streamed chat, completions and clients that hang up mid-stream, while hostile clients run beside them
// the whole time: clients that trickle their request head (cut at the header deadline with 408), clients that send
// chunked bodies past --max-body (413), clients that pipeline three requests on one connection (three answers, in
// order), and a poller that asks /health every 100 ms (answered within a second, every time). Every request read
// to its end gets a whole, well-formed answer; the server's resident memory stays flat from the first round to
// the last; it never crashes and exits cleanly on SIGTERM.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "server_test_util.h"
#include "support/paths.h"

namespace dg::test {
namespace server_soak_test {

constexpr int kClients = 32;
constexpr int kRounds = 5;

json merged(json a, const json& b) {
  a.update(b);
  return a;
}

struct Tally {
  std::mutex mu;
  std::vector<std::string> failures;
  std::atomic<int> complete{0}, hung_up{0}, busy{0};
  void fail(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    failures.push_back(what);
  }
};

// One request of the mix; kinds rotate with client and round.
void one_request(const ServerProcess& s, int client, int round, Tally& t) {
  const int kind = (client + round) % 5;
  const std::string tag = fmt::format("client {} round {} kind {}", client, round, kind);
  const json extra = {{"seed", client * 100 + round}, {"max_tokens", 6 + kind}};
  if (kind == 3 || kind == 4) {  // hang up after the role chunk (3) or after the first draft preview (4)
    const char* until = kind == 3 ? "\"role\"" : "diffgemma_draft";
    stream_post(s.port, "/v1/chat/completions",
                chat_request("soak " + tag, merged(extra, {{"stream", true}, {"drafts", kind == 4}})),
                [&](const std::string& got) { return got.find(until) == std::string::npos; });
    ++t.hung_up;
    return;
  }
  httplib::Client c = s.client();
  const httplib::Result r =
      kind == 2 ? c.Post("/v1/completions", merged(extra, {{"prompt", "soak " + tag}, {"steps", 2}}).dump(),
                         "application/json")
                : c.Post("/v1/chat/completions", chat_request("soak " + tag, merged(extra, {{"stream", kind == 1}})).dump(),
                         "application/json");
  if (!r) return t.fail(tag + ": no response: " + httplib::to_string(r.error()));
  if (r->status == 429) {
    ++t.busy;
    return;
  }
  if (r->status != 200) return t.fail(tag + fmt::format(": status {} {}", r->status, r->body));
  if (kind == 1) {
    const SseStream st = parse_sse(r->body);
    if (!st.error.empty() || !st.done || st.chunks.size() < 2) return t.fail(tag + ": bad stream " + st.raw);
    if (st.chunks.front()["choices"][0]["delta"]["role"] != "assistant") return t.fail(tag + ": no role chunk");
    const json& fin = st.chunks.back()["choices"][0]["finish_reason"];
    if (!(fin == "stop" || fin == "length")) return t.fail(tag + ": stream without finish " + st.raw);
  } else {
    const json j = json::parse(r->body, nullptr, false);
    if (j.is_discarded() || !j.contains("choices") || !j.contains("usage")) return t.fail(tag + ": bad body " + r->body);
    const json& ch = j["choices"][0];
    if (!(ch["finish_reason"] == "stop" || ch["finish_reason"] == "length")) return t.fail(tag + ": " + r->body);
    if (j["usage"]["completion_tokens"].get<int>() > 6 + kind) return t.fail(tag + ": over budget " + r->body);
  }
  ++t.complete;
}

// The hostile clients; each runs until `done`.
struct Hostile {
  std::atomic<bool> done{false};
  std::atomic<int> slow_cut{0}, oversize_refused{0}, pipelined{0}, health{0};
};

void slow_header_client(int port, Hostile& h, Tally& t) {
  while (!h.done) {
    const int fd = connect_and_send(port, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    if (fd < 0) return t.fail("slow client: cannot connect");
    std::string got;
    while (!h.done && !closed_by_server(fd, 0.5, &got)) send_all(fd, "X-Slow: one more line\r\n");
    ::close(fd);
    if (got.rfind("HTTP/1.1 408", 0) == 0) {
      ++h.slow_cut;
    } else if (!h.done) {
      return t.fail("slow client: closed without a 408: " + got.substr(0, 200));
    }
  }
}

void oversize_chunked_client(int port, Hostile& h, Tally& t) {
  const std::string head = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                           "\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string pad(32 << 10, ' '), chunk = fmt::format("{:x}\r\n{}\r\n", pad.size(), pad);
  while (!h.done) {
    const int fd = connect_and_send(port, head + fmt::format("1\r\n{{\r\n"));
    if (fd < 0) return t.fail("oversize client: cannot connect");
    for (int i = 0; i < 16 && send_all(fd, chunk); ++i) {  // 512 KiB against --max-body 256 KiB
    }
    std::string got;
    closed_by_server(fd, 10, &got);
    ::close(fd);
    if (got.rfind("HTTP/1.1 413", 0) != 0) return t.fail("oversize client: no 413: " + got.substr(0, 200));
    ++h.oversize_refused;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

void pipelining_client(int port, Hostile& h, Tally& t) {
  const std::string requests =
      "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" +
      raw_post("/v1/chat/completions", chat_request("pipelined", {{"max_tokens", 4}}));
  while (!h.done) {
    const int fd = connect_and_send(port, requests);
    if (fd < 0) return t.fail("pipelining client: cannot connect");
    // The chat answer queues behind the 32 clients' jobs: under ASan on a loaded machine that took over 60 s.
    const std::string got = recv_all(fd, 300);
    ::close(fd);
    const size_t a = got.find("{\"status\":\"ok\"}"), b = got.find("\"object\":\"list\""),
                 c = got.find("\"chat.completion\"");
    if (a == std::string::npos || b == std::string::npos || c == std::string::npos || !(a < b && b < c))
      return t.fail("pipelining client: not three answers in order: " + got.substr(0, 400));
    ++h.pipelined;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // a steady trickle, not a second load
  }
}

void health_poller(int port, Hostile& h, Tally& t) {
  while (!h.done) {
    const double secs = health_seconds(port);
    if (secs < 0 || secs > 1) return t.fail(fmt::format("/health took {} s", secs));
    ++h.health;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

TEST(ServerSoak, ConcurrentMixedClientsGetWholeAnswersAndMemoryStaysFlat) {
  ServerProcess s("-m " + source_path("models/dg-tiny") +
                  " --ctx 1024 --threads 2 -q --header-timeout 2 --max-body 262144");
  ASSERT_GT(s.port, 0) << "the server did not start; see " << s.log_path;
  Tally t;
  Hostile h;
  std::vector<std::thread> hostile;
  for (int i = 0; i < 10; ++i) hostile.emplace_back([&] { slow_header_client(s.port, h, t); });
  hostile.emplace_back([&] { oversize_chunked_client(s.port, h, t); });
  for (int i = 0; i < 2; ++i) hostile.emplace_back([&] { pipelining_client(s.port, h, t); });
  hostile.emplace_back([&] { health_poller(s.port, h, t); });
  double rss_first = 0;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::thread> clients;
    for (int c = 0; c < kClients; ++c) clients.emplace_back([&, c] { one_request(s, c, round, t); });
    for (std::thread& th : clients) th.join();
    if (round == 0) rss_first = s.rss_mb();
  }
  h.done = true;
  for (std::thread& th : hostile) th.join();
  for (const std::string& f : t.failures) ADD_FAILURE() << f;
  EXPECT_GE(h.slow_cut, 10) << "every slow client was cut at least once";
  EXPECT_GE(h.oversize_refused, 1);
  EXPECT_GE(h.pipelined, 2);
  EXPECT_GE(h.health, 10);
  EXPECT_EQ(t.complete + t.busy + t.hung_up, kClients * kRounds);
  EXPECT_EQ(t.busy, 0) << "the queue (64) holds every client";
  EXPECT_EQ(t.hung_up, kClients * kRounds * 2 / 5);

  // Still whole: one more answer, then every job accounted for (the last one queued behind all the others).
  auto r = s.client().Post("/v1/chat/completions", chat_request("after the soak").dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  std::string metrics;
  EXPECT_TRUE(eventually([&] {  // the worker settles the last answer's cache after sending it
    auto m = s.client().Get("/metrics");
    metrics = m ? m->body : "";
    return metrics.find("diffgemma_jobs_running 0") != std::string::npos;
  }));
  for (const char* line : {"diffgemma_jobs_total{outcome=\"failed\"} 0", "diffgemma_jobs_total{outcome=\"timed_out\"} 0",
                           "diffgemma_queue_depth 0"})
    EXPECT_NE(metrics.find(line), std::string::npos) << line << "\n" << metrics;
  EXPECT_EQ(metric_value(metrics, "diffgemma_jobs_total{outcome=\"completed\"}") +
                metric_value(metrics, "diffgemma_jobs_total{outcome=\"cancelled\"}"),
            kClients * kRounds + 1 + h.pipelined)
      << "every job answered or cancelled, once";
  const double rss_last = s.rss_mb();
  EXPECT_LT(rss_last, rss_first * 1.25 + 16) << "resident memory grew from " << rss_first << " MB to " << rss_last;
  EXPECT_EQ(s.stop(), 0) << "a clean exit on SIGTERM; see " << s.log_path;
}

}  // namespace server_soak_test
}  // namespace dg::test
