// Concurrency on the serial worker with a slow scripted model (20 ms per denoise step): a full queue answers 429,
// a client that hangs up mid-stream frees the worker at the next step, a request past its deadline gets 504 (or
// a stream error event), and stopping the server answers what is queued. The load client (scripts/serve_load.py)
// against `diffgemma serve` on the embedded model: every streamed answer well-formed, one JSON line of results.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "server_test_util.h"
#include "support/paths.h"
#include "support/process.h"

namespace dg::test {
namespace server_load_test {

// A long job: endless tokens at 20 ms per step, 8 steps per block, up to 2000 tokens (~5 s of work).
json slow_request(bool stream) {
  return chat_request("slow please", {{"max_tokens", 2000}, {"steps", 8}, {"stream", stream}, {"drafts", stream}});
}

TEST(ServerLoad, AFullQueueGets429AndAHangUpFreesTheWorker) {
  server::ServerOptions o;
  o.max_queue = 1;
  TestServer s(o, true);
  std::atomic<bool> running{false}, hang_up{false};
  auto a = std::async(std::launch::async, [&] {
    return s.stream("/v1/chat/completions", slow_request(true), [&](const std::string& got) {
      if (got.find("diffgemma_draft") != std::string::npos) running = true;  // the worker denoises it
      return !hang_up.load();
    });
  });
  ASSERT_TRUE(eventually([&] { return running.load(); }));
  auto b = std::async(std::launch::async, [&] { return s.post("/v1/chat/completions", chat_request("queued")); });
  ASSERT_TRUE(eventually([&] { return s.metric("diffgemma_queue_depth") == 1; }));

  auto c = s.post("/v1/chat/completions", chat_request("one too many"));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->status, 429);
  EXPECT_EQ(json::parse(c->body)["error"]["code"], "queue_full");
  EXPECT_EQ(json::parse(c->body)["error"]["type"], "rate_limit_error");
  EXPECT_EQ(c->get_header_value("Retry-After"), "1") << "clients back off from the 429";

  hang_up = true;
  a.get();
  auto rb = b.get();
  ASSERT_TRUE(rb);
  EXPECT_EQ(rb->status, 200) << rb->body;
  EXPECT_EQ(json::parse(rb->body)["choices"][0]["message"]["content"], "Hello from the script.");
  ASSERT_TRUE(eventually([&] { return s.metric("diffgemma_jobs_total{outcome=\"cancelled\"}") == 1; }));
  // The hung-up job ran far fewer than its 2000 / 64 * 8 = 256 steps.
  EXPECT_LT(s.metric("diffgemma_denoise_steps_total"), 128);
}

TEST(ServerLoad, RequestsPastTheirDeadlineGet504) {
  server::ServerOptions o;
  o.timeout_s = 1.5;  // the slow jobs need ~5 s; the fast one at the end gets 1.5 s even on a loaded CI machine
  TestServer s(o, true);
  auto r = s.post("/v1/chat/completions", slow_request(false));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 504) << r->body;
  const json plain_error = json::parse(r->body)["error"];
  EXPECT_EQ(plain_error["type"], "timeout_error");
  EXPECT_EQ(plain_error["code"], "timeout") << "a string code, the same as the stream's";

  auto st = s.post("/v1/chat/completions", slow_request(true));
  ASSERT_TRUE(st);
  EXPECT_EQ(st->status, 200);
  const SseStream sse = parse_sse(st->body);
  ASSERT_FALSE(sse.chunks.empty());
  EXPECT_EQ(sse.chunks.front()["choices"][0]["delta"]["role"], "assistant");
  ASSERT_TRUE(sse.chunks.back().contains("error")) << sse.raw.substr(sse.raw.size() > 400 ? sse.raw.size() - 400 : 0);
  const json streamed_error = sse.chunks.back()["error"];
  EXPECT_EQ(streamed_error["type"], plain_error["type"]);
  EXPECT_EQ(streamed_error["code"], plain_error["code"]) << "one shape for a timeout, streamed or not";
  EXPECT_FALSE(sse.done);
  EXPECT_EQ(s.metric("diffgemma_jobs_total{outcome=\"timed_out\"}"), 2);

  // The next request's 1.5 s start when it is queued: wait until the worker has let the timed-out jobs go (their
  // slots are released after the answer went out), or a slow sanitizer build would spend its budget waiting.
  for (int i = 0; i < 500 && s.metric("diffgemma_jobs_running") > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  auto ok = s.post("/v1/chat/completions", chat_request("fast"));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST(ServerLoad, StoppingTheServerAnswersQueuedRequests) {
  std::future<httplib::Result> queued;
  {
    server::ServerOptions o;
    TestServer s(o, true);
    auto a = std::async(std::launch::async, [&] { return s.post("/v1/chat/completions", slow_request(false)); });
    ASSERT_TRUE(eventually([&] { return s.metric("diffgemma_jobs_running") == 1; }));
    queued = std::async(std::launch::async, [&] { return s.post("/v1/chat/completions", chat_request("later")); });
    ASSERT_TRUE(eventually([&] { return s.metric("diffgemma_queue_depth") == 1; }));
    s.srv->stop();
    auto ra = a.get();
    ASSERT_TRUE(ra);
    EXPECT_EQ(ra->status, 503) << ra->body;
  }
  auto rq = queued.get();
  ASSERT_TRUE(rq);
  EXPECT_EQ(rq->status, 503) << rq->body;
}

TEST(ServerLoad, TheLoadClientGetsWellFormedStreamsFromEveryClient) {
  ServerProcess s("-m " + source_path("models/dg-tiny") + " --ctx 512 -q");
  ASSERT_GT(s.port, 0) << "the server did not start; see " << s.log_path;
  const ProcessResult r = run_command("python3 " + source_path("scripts/serve_load.py") + " --port " +
                                          std::to_string(s.port) + " --streams 6 --prompt-tokens 120 --max-tokens 40",
                                      false);
  ASSERT_EQ(r.code, 0) << r.out;
  const json line = json::parse(r.out);
  EXPECT_EQ(line["event"], "serve_load");
  EXPECT_EQ(line["streams"], 6);
  EXPECT_EQ(line["well_formed"], 6) << r.out;
  EXPECT_GT(line["completion_tokens"].get<int>(), 0);
  EXPECT_GT(line["aggregate_tok_per_s"].get<double>(), 0.0);
  EXPECT_GT(line["first_content_p50_s"].get<double>(), 0.0);
  EXPECT_TRUE(line["errors"].empty()) << r.out;
  // A server that is not there: no answer is well-formed, and the exit status says so.
  s.stop();
  const ProcessResult none = run_command("python3 " + source_path("scripts/serve_load.py") + " --port " +
                                             std::to_string(s.port) + " --streams 2 --timeout 5",
                                         false);
  EXPECT_EQ(none.code, 1) << none.out;
  EXPECT_NE(none.out.find("\"well_formed\": 0"), std::string::npos) << none.out;
}

}  // namespace server_load_test
}  // namespace dg::test
