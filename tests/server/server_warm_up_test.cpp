// The server's warm-up (`serve --warmup`, Server::warm_up) runs its chat for one block on the worker and leaves
// nothing behind: a warmed server answers the warm-up's own prompt and another one exactly as a cold server does
// (text, finish, usage with cached tokens: a cache the warm-up left in its slot would be reused), one request at a
// time and batched; /metrics and the op-log count only requests, and the op-log replays. The option end to end:
// bad values are refused before anything loads, `on` runs on the cpu and says so, `auto` is off there.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>

#include "engine/oplog.h"
#include "server_test_util.h"
#include "support/paths.h"
#include "support/process.h"

namespace dg::test {
namespace server_warm_up_test {

// The warm-up's own messages (so a prefix it left cached would be found), then a prompt of another conversation.
std::vector<json> requests() {
  json same = json::parse(server::warm_up_body().dump());
  same["seed"] = 7;
  same["max_tokens"] = 24;
  return {same, chat_request("Tokyo is the capital of", {{"max_tokens", 24}})};
}

// What a request's answer says, without its id and time.
json answer_of(const TestServer& s, const json& request) {
  auto r = s.post("/v1/chat/completions", request);
  EXPECT_TRUE(r);
  if (!r) return {};
  EXPECT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  return {{"choices", j.at("choices")}, {"usage", j.at("usage")}};
}

std::vector<json> answers(server::ServerOptions opt, bool warm_up) {
  TestServer s(opt, false, warm_up);
  std::vector<json> out;
  for (const json& r : requests()) out.push_back(answer_of(s, r));
  return out;
}

void expect_same_answers(int max_batch) {
  server::ServerOptions opt;
  opt.max_batch = max_batch;
  const std::vector<json> cold = answers(opt, false), warm = answers(opt, true);
  ASSERT_EQ(cold.size(), warm.size());
  for (size_t i = 0; i < cold.size(); ++i) {
    EXPECT_EQ(warm[i], cold[i]) << "request " << i << "\ncold: " << cold[i].dump() << "\nwarm: " << warm[i].dump();
    EXPECT_EQ(warm[i]["usage"]["prompt_tokens_details"]["cached_tokens"], 0) << warm[i].dump();
  }
}

TEST(ServerWarmUp, AWarmedServerAnswersAsAColdOne) { expect_same_answers(1); }

TEST(ServerWarmUp, AWarmedBatchedServerAnswersAsAColdOne) { expect_same_answers(4); }

TEST(ServerWarmUp, ItRunsTheWarmUpChatForOneBlockAndTheFirstRequestFindsItsSlotEmpty) {
  // A denoiser factory is asked once per job the worker runs; answering nullptr leaves the job on the model.
  std::vector<JobSpec> specs;
  DenoiserFactory watch = [&](const Model&, const Job& job) -> std::unique_ptr<Denoiser> {
    specs.push_back(job.spec);
    return nullptr;
  };
  std::mutex mu;
  std::vector<std::string> log;
  auto say = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    log.push_back(line);
  };
  const EngineCore& e = tiny_server_engine();
  server::ServerOptions opt;
  opt.port = 0;
  server::Server srv(e, opt, say, watch);
  const int port = srv.bind();
  const std::optional<double> seconds = srv.warm_up();
  ASSERT_TRUE(seconds.has_value());
  EXPECT_GT(*seconds, 0);
  ASSERT_EQ(specs.size(), 1u) << "the warm-up is one job on the worker";
  EXPECT_EQ(specs[0].sampler.max_new_tokens, e.config().canvas);
  EXPECT_EQ(specs[0].sampler.steps, e.default_sampler(SamplerProfile::kContract).steps);
  const std::string prompt = e.tokenizer().decode(specs[0].prompt, false);
  EXPECT_NE(prompt.find(server::warm_up_body()["messages"][0]["content"].get<std::string>()), std::string::npos)
      << prompt;

  std::thread run([&] { srv.run(); });
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(180, 0);
  auto r = c.Post("/v1/chat/completions", chat_request("Hi").dump(), "application/json");
  srv.stop();
  run.join();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  std::string all;
  for (const std::string& line : log) all += line + "\n";
  // The warm-up ran on slot 0, the slot an empty server's first request takes: it is empty again.
  EXPECT_NE(all.find("job 1: slot 0 (empty): reuses 0 of "), std::string::npos) << all;
  EXPECT_NE(all.find("the slot held 0"), std::string::npos) << all;
  EXPECT_EQ(all.find("job 0"), std::string::npos) << all;
}

TEST(ServerWarmUp, MetricsAndTheOpLogCountOnlyRequests) {
  server::ServerOptions opt;
  opt.log_dir = scratch_dir("warm-up-oplog");
  std::string path;
  {
    TestServer s(opt, false, true);
    EXPECT_EQ(s.metric("diffgemma_jobs_total{outcome=\"completed\"}"), 0);
    EXPECT_EQ(s.metric("diffgemma_denoise_steps_total"), 0);
    EXPECT_EQ(s.metric("diffgemma_completion_tokens_total"), 0);
    for (const json& r : requests()) answer_of(s, r);
    EXPECT_EQ(s.metric("diffgemma_jobs_total{outcome=\"completed\"}"), 2);
    path = s.srv->oplog_path();
  }
  std::ifstream in(path);
  int jobs = 0;
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line);
    if (j.contains("job")) {
      EXPECT_NE(j["job"], 0) << "the warm-up is in the op-log: " << line;
    }
    if (j.value("op", "") == "route") ++jobs;
  }
  EXPECT_EQ(jobs, 2);
  const ReplayReport r = replay_oplog(tiny_server_engine(), path);
  EXPECT_FALSE(r.diverged) << r.divergence;
  EXPECT_EQ(r.jobs, 2);
}

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(ServerWarmUp, TheOptionRefusesBadValues) {
  for (const char* bad : {"yes", "", "ON"}) {
    const ProcessResult r = run_command(cli_path() + " serve --port 0 --warmup '" + bad + "'", true);
    EXPECT_NE(r.code, 0) << bad;
    EXPECT_NE(r.out.find("--warmup"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("auto,on,off"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("listening"), std::string::npos) << r.out;
  }
}

TEST(ServerWarmUp, OnRunsOnTheCpuAndAutoIsOffThere) {
  const std::string model = "-m " + source_path("models/dg-tiny") + " --ctx 256 -q";
  {
    ServerProcess s(model + " --warmup on --max-batch 2");
    ASSERT_GT(s.port, 0) << "the server did not start; see " << s.log_path;
    const std::string log = text_of(s.log_path);
    EXPECT_NE(log.find("warming up (cpu): one block ... done in "), std::string::npos) << log;
    EXPECT_LT(log.find("done in "), log.find("listening on")) << log;
    auto r = s.client().Post("/v1/chat/completions", chat_request("Hi").dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  }
  ServerProcess s(model);
  ASSERT_GT(s.port, 0) << "the server did not start; see " << s.log_path;
  EXPECT_EQ(text_of(s.log_path).find("warming up"), std::string::npos) << text_of(s.log_path);
}

}  // namespace server_warm_up_test
}  // namespace dg::test
