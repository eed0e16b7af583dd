// Soak: `diffgemma serve` on the embedded model as a child process; 32 concurrent clients x 5 requests mixing
// plain and streamed chat, completions and clients that hang up mid-stream. Every request read to its end gets a
// whole, well-formed answer; the server's resident memory stays flat from the first round to the last; it never
// crashes and exits cleanly on SIGTERM.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "server_test_util.h"
#include "support/paths.h"

namespace dg::test {
namespace {

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

TEST(ServerSoak, ConcurrentMixedClientsGetWholeAnswersAndMemoryStaysFlat) {
  ServerProcess s("-m " + source_path("models/dg-tiny") + " --ctx 1024 --threads 2 -q");
  ASSERT_GT(s.port, 0) << "the server did not start; see " << s.log_path;
  Tally t;
  double rss_first = 0;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::thread> clients;
    for (int c = 0; c < kClients; ++c) clients.emplace_back([&, c] { one_request(s, c, round, t); });
    for (std::thread& th : clients) th.join();
    if (round == 0) rss_first = s.rss_mb();
  }
  for (const std::string& f : t.failures) ADD_FAILURE() << f;
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
            kClients * kRounds + 1)
      << "every job answered or cancelled, once";
  const double rss_last = s.rss_mb();
  EXPECT_LT(rss_last, rss_first * 1.25 + 16) << "resident memory grew from " << rss_first << " MB to " << rss_last;
  EXPECT_EQ(s.stop(), 0) << "a clean exit on SIGTERM; see " << s.log_path;
}

}  // namespace
}  // namespace dg::test
