// The batched worker (--max-batch > 1, the default) on the embedded model: concurrent requests are denoised
// together (the batch-occupancy histogram sees steps of more than one job) and each answer is the one the serial
// worker (--max-batch 1) gives, with and without --fused-commit; a client that hangs up leaves the batch while the
// others finish unchanged; stopping answers everything; a batch that does not fit the memory is refused at start.
#include <gtest/gtest.h>

#include <fstream>
#include <future>

#include "engine/oplog.h"
#include "support/expect_error.h"
#include "server_test_util.h"
#include "support/paths.h"

namespace dg::test {
namespace server_batch_test {

// Long answers without the confident stop (the threshold is out of reach), so the requests overlap. The fourth
// runs the reference sampler: categorical draws, made inside the batched step.
json long_request(size_t i, const json& extra = json::object()) {
  static const char* users[] = {"Count from 1 to 40.", "Name some colours.", "Tell me about cats.",
                                "Write a poem about the sea."};
  json r = chat_request(users[i % 4], {{"max_tokens", 96}, {"steps", 4}, {"confidence_threshold", 1e-30},
                                       {"seed", 10 + static_cast<int>(i)}});
  if (i % 4 == 3) r["sampler"] = "reference";
  for (auto it = extra.begin(); it != extra.end(); ++it) r[it.key()] = it.value();
  return r;
}

std::string content(const httplib::Result& r) {
  EXPECT_TRUE(r);
  if (!r) return "";
  EXPECT_EQ(r->status, 200) << r->body;
  return json::parse(r->body)["choices"][0]["message"]["content"].get<std::string>();
}

server::ServerOptions serial() {
  server::ServerOptions o;
  o.max_batch = 1;
  return o;
}

// The default: as many as fit in memory, capped (on the CPU at 8), with as many sessions.
TEST(ServerBatch, ConcurrentRequestsAreDenoisedTogetherByDefaultAndAnswerAsAlone) {
  constexpr size_t kN = 4;
  std::vector<std::string> alone;
  {
    TestServer s(serial());
    EXPECT_EQ(s.srv->memory_plan().max_batch, 1);
    EXPECT_EQ(s.metric("diffgemma_max_batch"), 1);
    for (size_t i = 0; i < kN; ++i) alone.push_back(content(s.post("/v1/chat/completions", long_request(i))));
    EXPECT_EQ(s.metric("diffgemma_batch_occupancy_sum"), s.metric("diffgemma_batch_occupancy_count"))
        << "the serial worker denoises one job per step";
  }
  TestServer s;
  const MemoryPlan& plan = s.srv->memory_plan();
  EXPECT_EQ(plan.max_batch, 8) << plan.why;
  EXPECT_EQ(plan.slots, 8);
  EXPECT_EQ(s.metric("diffgemma_max_batch"), 8);
  EXPECT_EQ(s.metric("diffgemma_session_slots"), 8);
  std::vector<std::future<httplib::Result>> futures;
  for (size_t i = 0; i < kN; ++i)
    futures.push_back(std::async(std::launch::async, [&s, i] { return s.post("/v1/chat/completions", long_request(i)); }));
  for (size_t i = 0; i < kN; ++i) EXPECT_EQ(content(futures[i].get()), alone[i]) << "request " << i;
  const double sum = s.metric("diffgemma_batch_occupancy_sum"), count = s.metric("diffgemma_batch_occupancy_count");
  EXPECT_GT(count, 0);
  EXPECT_GT(sum, count) << "some step must denoise more than one job";
  EXPECT_EQ(s.metric("diffgemma_jobs_total{outcome=\"completed\"}"), static_cast<double>(kN));
  // A chat job settles its cache after the answer went out.
  EXPECT_TRUE(eventually([&] { return s.metric("diffgemma_jobs_running") == 0; }));
}

// With --fused-commit the batched worker encodes each committed block in the round's denoise forward: the answers
// stay the serial worker's (the CPU reference gives the two passes' bits).
TEST(ServerBatch, FusedCommitsAnswerAsTheSerialWorker) {
  constexpr size_t kN = 4;
  std::vector<std::string> alone;
  {
    TestServer s(serial());
    for (size_t i = 0; i < kN; ++i) alone.push_back(content(s.post("/v1/chat/completions", long_request(i))));
  }
  ServerProcess p("-m " + source_path("models/dg-tiny") + " --ctx 8192 -q --max-batch 4 --fused-commit");
  ASSERT_GT(p.port, 0) << "the server did not start; see " << p.log_path;
  std::vector<std::future<httplib::Result>> futures;
  for (size_t i = 0; i < kN; ++i)
    futures.push_back(std::async(std::launch::async, [&p, i] {
      return p.client().Post("/v1/chat/completions", long_request(i).dump(), "application/json");
    }));
  for (size_t i = 0; i < kN; ++i) EXPECT_EQ(content(futures[i].get()), alone[i]) << "request " << i;
  EXPECT_EQ(p.stop(), 0);
}

TEST(ServerBatch, AHangUpLeavesTheBatchAndTheOthersFinishUnchanged) {
  std::string want;
  {
    TestServer s(serial());
    want = content(s.post("/v1/chat/completions", long_request(1)));
  }
  server::ServerOptions o;
  o.max_batch = 4;
  TestServer s(o);
  auto gone = std::async(std::launch::async, [&] {
    return s.stream("/v1/chat/completions",
                    long_request(0, {{"max_tokens", 2000}, {"steps", 8}, {"stream", true}, {"drafts", true}}),
                    [&](const std::string& got) { return got.find("\"step\":3") == std::string::npos; });
  });
  auto stays = std::async(std::launch::async, [&] { return s.post("/v1/chat/completions", long_request(1)); });
  EXPECT_EQ(content(stays.get()), want);
  gone.get();
  EXPECT_TRUE(eventually([&] { return s.metric("diffgemma_jobs_total{outcome=\"cancelled\"}") == 1; }));
  EXPECT_TRUE(eventually([&] { return s.metric("diffgemma_jobs_running") == 0; }));
  // The hung-up job left long before its 2000 / 32 * 8 = 504 steps.
  EXPECT_LT(s.metric("diffgemma_denoise_steps_total"), 200);
}

// The op-log of a batched run (jobs interleaved step by step, their blocks encoded together) replays identically:
// every job's ops and events carry its id and slot, and the batched forward equals one sequence at a time.
TEST(ServerBatch, ABatchedSessionsOpLogReplaysIdentically) {
  server::ServerOptions o;
  o.max_batch = 4;
  o.slots = 4;
  o.log_dir = scratch_dir("oplog_batch");
  std::string path;
  {
    TestServer s(o);
    std::vector<std::future<httplib::Result>> futures;
    for (size_t i = 0; i < 3; ++i)
      futures.push_back(std::async(std::launch::async, [&s, i] { return s.post("/v1/chat/completions", long_request(i)); }));
    for (auto& f : futures) EXPECT_FALSE(content(f.get()).empty());
    EXPECT_TRUE(eventually([&] { return s.metric("diffgemma_jobs_running") == 0; }));
    EXPECT_GT(s.metric("diffgemma_batch_occupancy_sum"), s.metric("diffgemma_batch_occupancy_count"));
    path = s.srv->oplog_path();
  }
  const ReplayReport r = replay_oplog(tiny_server_engine(), path);
  EXPECT_FALSE(r.diverged) << r.divergence;
  EXPECT_EQ(r.jobs, 3);
}

// Prefill interleaves with the running jobs' steps: a long prompt is encoded --prefill-per-step tokens per round,
// and a running job takes one denoise step every round meanwhile. The op-log shows it: between the long job's
// route and its sync, the running job's committed blocks hold about one step per prefill chunk (prefilling the
// prompt in one go would leave none there).
TEST(ServerBatch, ALongPromptsPrefillInterleavesWithTheRunningJobsSteps) {
  constexpr int64_t kChunk = 8;
  server::ServerOptions o;
  o.max_batch = 2;
  o.slots = 2;
  o.prefill_per_step = kChunk;
  o.log_dir = scratch_dir("oplog_interleave");
  TestServer s(o);
  // Both requests may take minutes under a sanitizer on a loaded machine: clients that wait that long.
  auto post = [&](const char* path, const json& body) {
    httplib::Client c = s.client();
    c.set_read_timeout(600, 0);
    return c.Post(path, body.dump(), "application/json");
  };
  // The running job must outlast the long prefill: a raw completion that the embedded model continues with
  // padding and no stop token (its chat answers all stop within a few blocks).
  auto running = std::async(std::launch::async, [&] {
    return post("/v1/completions", {{"model", "dg-tiny"}, {"prompt", "1, 2, 3, 4, 5,"}, {"max_tokens", 6000},
                                    {"steps", 2}, {"confidence_threshold", 1e-30}, {"seed", 10}});
  });
  ASSERT_TRUE(eventually([&] { return s.metric("diffgemma_denoise_steps_total") >= 1; }, 120));
  std::string text;
  for (int i = 0; i < 30; ++i) text += "Tell me about cats and dogs. ";  // ~30 chunks
  EXPECT_FALSE(content(post("/v1/chat/completions", chat_request(text))).empty());
  s.srv->stop();  // the running job is still far from its 6000 tokens: it is answered 503
  auto r = running.get();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;

  std::vector<json> records;
  std::ifstream in(s.srv->oplog_path());
  for (std::string line; std::getline(in, line);) records.push_back(json::parse(line));
  // The long job: the route with the longest prompt.
  size_t route = records.size();
  for (size_t i = 0; i < records.size(); ++i)
    if (records[i].value("op", "") == "route" &&
        (route == records.size() || records[i]["prompt"] > records[route]["prompt"]))
      route = i;
  ASSERT_LT(route, records.size());
  const auto long_job = records[route]["job"];
  size_t sync = route;
  while (sync < records.size() && !(records[sync].value("op", "") == "sync" && records[sync]["job"] == long_job))
    ++sync;
  ASSERT_LT(sync, records.size());
  const int64_t encoded = records[sync]["encoded"].get<int64_t>();
  const int64_t chunks = (encoded + kChunk - 1) / kChunk;
  ASSERT_GE(chunks, 20) << "the long prompt has only " << encoded << " tokens";
  int64_t steps_between = 0;
  for (size_t i = route + 1; i < sync; ++i)
    if (records[i].value("event", "") == "block" && records[i]["job"] != long_job)
      steps_between += records[i]["steps"].get<int64_t>();
  // One step per round while the chunks are encoded; the blocks straddling the two ends are not counted.
  EXPECT_GE(steps_between, chunks - 4) << encoded << " prompt tokens in " << chunks << " chunks";
  EXPECT_LE(steps_between, chunks + 1);
}

// Stopping the server cancels every job in flight at its next step (503) and answers what is still queued.
TEST(ServerBatch, StoppingTheServerAnswersEveryJobInFlightAndQueued) {
  std::future<httplib::Result> queued;
  {
    server::ServerOptions o;
    o.max_batch = 2;
    o.slots = 2;
    TestServer s(o);
    const json endless = {{"max_tokens", 2000}, {"steps", 8}};
    auto a = std::async(std::launch::async, [&] { return s.post("/v1/chat/completions", long_request(0, endless)); });
    auto b = std::async(std::launch::async, [&] { return s.post("/v1/chat/completions", long_request(1, endless)); });
    ASSERT_TRUE(eventually([&] { return s.metric("diffgemma_jobs_running") == 2; }));
    queued = std::async(std::launch::async, [&] { return s.post("/v1/chat/completions", long_request(2)); });
    ASSERT_TRUE(eventually([&] { return s.metric("diffgemma_queue_depth") == 1; }));
    s.srv->stop();
    for (auto* f : {&a, &b}) {
      auto r = f->get();
      ASSERT_TRUE(r);
      EXPECT_EQ(r->status, 503) << r->body;
    }
  }
  auto rq = queued.get();
  ASSERT_TRUE(rq);
  EXPECT_EQ(rq->status, 503) << rq->body;
}

// An explicit batch beyond the memory (--memory 0.01 GiB) is an error naming the numbers, before anything runs.
TEST(ServerBatch, ABatchThatDoesNotFitIsRefusedAtStart) {
  server::ServerOptions o;
  o.max_batch = 64;
  o.memory_gib = 0.01;
  DG_EXPECT_ERROR(TestServer s(o), "--max-batch 64 with 64 slots needs", "KV caches of", "0 fit");
}

}  // namespace server_batch_test
}  // namespace dg::test
