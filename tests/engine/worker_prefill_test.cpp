// The batched worker prefills the prompts of the jobs it admits together, in one encoder pass a round, sharing
// --prefill-per-step tokens a round in turns (PrefillRotation): three short chat prompts queued behind a long one
// finish their prefill before it (the op-log's sync records), the long one is not starved, and every answer is
// the serial worker's.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_tokens.h"
#include "chat/template.h"
#include "engine/engine_core.h"
#include "serving/worker.h"
#include "support/paths.h"

namespace dg {
namespace worker_prefill_test {

struct Outcome {
  std::vector<std::string> answers;
  std::vector<uint64_t> synced;  // jobs in the order their prompt's prefill ended (the first sync record of each)
  Histogram::Snapshot prompts, tokens;  // per encoder pass of prompt tokens
};

Outcome run(const EngineCore& engine, int max_batch, const std::vector<std::string>& users, const std::string& log_path) {
  JobQueue queue(16);
  WorkerStats stats(max_batch);
  OpLog oplog(log_path);
  WorkerOptions opt;
  opt.max_batch = max_batch;
  opt.slots = 4;
  opt.prefill_chunk = 16;
  opt.oplog = &oplog;
  Worker worker(engine, queue, stats, opt);
  const ChatTokens chat = ChatTokens::from(engine.tokenizer());
  std::vector<std::shared_ptr<Job>> jobs;
  for (size_t i = 0; i < users.size(); ++i) {
    auto job = std::make_shared<Job>();
    job->id = i + 1;
    Message m;
    m.content = users[i];
    job->spec.conversation.messages.push_back(m);
    const RenderedPrompt r = render_chat(job->spec.conversation, job->spec.render, engine.tokenizer(), chat);
    job->spec.prompt = r.ids;
    job->spec.prompt_end = r.end;
    job->spec.sampler = engine.default_sampler(SamplerProfile::kContract);
    job->spec.sampler.seed = 20 + i;
    job->spec.sampler.max_new_tokens = 64;
    job->spec.sampler.steps = 3;
    job->spec.sampler.confidence_threshold = 1e-30;
    jobs.push_back(job);
    EXPECT_TRUE(queue.push(job));  // all queued before the worker starts: admitted in one round
  }
  worker.start();
  Outcome out;
  for (const auto& job : jobs) {
    for (;;) {
      const std::optional<JobEvent> e = job->events.pop(std::chrono::minutes(5));
      if (!e || e->kind == JobEvent::Kind::kError) {
        ADD_FAILURE() << "job " << job->id << ": " << (e ? e->text : "no answer within 5 minutes");
        break;
      }
      if (e->kind == JobEvent::Kind::kDone) {
        out.answers.push_back(e->reply.content);
        break;
      }
    }
  }
  worker.stop();
  out.prompts = stats.prefill_prompts.snapshot();
  out.tokens = stats.prefill_tokens.snapshot();
  std::ifstream in(log_path);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json r = nlohmann::json::parse(line);
    if (r.value("op", "") != "sync") continue;
    const auto job = r["job"].get<uint64_t>();
    if (std::find(out.synced.begin(), out.synced.end(), job) == out.synced.end()) out.synced.push_back(job);
  }
  return out;
}

TEST(WorkerPrefill, ShortPromptsQueuedBehindALongOneArePrefilledFirstAndAnswerAsAlone) {
  EngineOptions eo;
  eo.model_dir = test::source_path("models/dg-tiny");
  const std::unique_ptr<EngineCore> engine = EngineCore::open(eo);
  std::string long_text;
  for (int i = 0; i < 25; ++i) long_text += "Tell me about cats and dogs. ";  // ~200 tokens: 12 rounds of 16
  const std::vector<std::string> users = {long_text, "Hi.", "Name a colour.", "Count to 3."};
  const std::string dir = test::scratch_dir("worker_prefill");
  const Outcome alone = run(*engine, 1, users, dir + "/alone.jsonl");
  const Outcome together = run(*engine, 4, users, dir + "/together.jsonl");
  EXPECT_EQ(together.answers, alone.answers);
  EXPECT_EQ(alone.synced, (std::vector<uint64_t>{1, 2, 3, 4}));
  ASSERT_EQ(together.synced.size(), 4u);
  EXPECT_EQ(together.synced.back(), 1u) << "the short prompts' prefill ends first; then the long one's";
  // Every pass within the budget of 16 tokens (no prompt here ends within the 2 tokens a round may take past it,
  // PrefillRotation); the first rounds' passes held several prompts.
  ASSERT_GT(together.tokens.count, 10u);
  EXPECT_EQ(together.tokens.cumulative[0], together.tokens.count) << "a pass of more than 16 prompt tokens";
  EXPECT_LT(together.prompts.cumulative[0], together.prompts.count) << "no pass held two prompts";
  EXPECT_GE(together.prompts.sum, static_cast<double>(together.prompts.count) + 2);
}

}  // namespace worker_prefill_test
}  // namespace dg
